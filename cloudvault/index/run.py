"""`vault index`: walk mirrors, plan what changed, read it, and commit each archive in one transaction."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import blake3

from cloudvault.archive.seekable import SeekableWriter, needs_copy
from cloudvault.catalog import write
from cloudvault.catalog.db import transaction
from cloudvault.config import seekable_copy_path, seekable_dir
from cloudvault.hashing import CHUNK
from cloudvault.index.archive import MAX_SCANNED_MEMBER, ArchiveScan, scan_archive, worth_scanning
from cloudvault.index.definition import MirrorDefinition, load_manifest
from cloudvault.index.listing import compare_listing, parse_listing
from cloudvault.index.plan import is_archive, listing_for, plan_index
from cloudvault.index.roots import MirrorRoot
from cloudvault.index.secrets import SecretScanner, compile_rules, redact
from cloudvault.index.walk import entry_of
from cloudvault.mirrorfs import LocalMirror, WalkProblem, open_mirror
from cloudvault.models import Entry, FileStat, Flag
from cloudvault.progress import Progress

DOC_NAMES = {"SEARCH_INDEX.tsv", "CATALOG.md", "backup_status.json"}
MAX_DOC = 2 << 20
FILE_BATCH = 200
DAMAGE = {
    "not_zstd",
    "corrupt_frame",
    "truncated",
    "not_tar",
    "corrupt_header",
    "unreadable",
    "list_mismatch",
    "unsafe_member",
    "walk_error",
}


@dataclass
class IndexReport:
    mirrors: list[str] = field(default_factory=list)
    files_seen: int = 0
    files_read: int = 0
    files_unchanged: int = 0
    files_deleted: int = 0
    archives_read: int = 0
    members_indexed: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    flags: dict[str, int] = field(default_factory=dict)

    @property
    def damaged(self) -> bool:
        return any(kind in DAMAGE for kind in self.flags)

    def count(self, flags: list[Flag] | dict[str, int]) -> None:
        items = flags.items() if isinstance(flags, dict) else ((f.kind, 1) for f in flags)
        for kind, n in items:
            self.flags[kind] = self.flags.get(kind, 0) + n


def index_mirrors(
    conn: sqlite3.Connection,
    roots: list[MirrorRoot],
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    copy_cache: Path | None = None,
) -> IndexReport:
    """Index each root; with copy_cache, also write seekable copies of single-frame archives in the same pass."""
    report = IndexReport()
    started = time.monotonic()
    progress = progress or Progress()
    for mroot in roots:
        _index_one(conn, mroot, report, workers, progress, copy_cache)
        report.mirrors.append(mroot.definition.name)
    report.seconds = time.monotonic() - started
    return report


def _index_one(
    conn: sqlite3.Connection,
    mroot: MirrorRoot,
    report: IndexReport,
    workers: int | None,
    progress: Progress,
    copy_cache: Path | None,
) -> None:
    definition = mroot.definition
    with transaction(conn):
        mirror_id = write.upsert_mirror(conn, definition.name, mroot.mirror.root, definition.manifest)
    walked, problems = [], []
    for item in mroot.mirror.walk():
        (problems if isinstance(item, WalkProblem) else walked).append(item)
    known = {
        row[0]: tuple(row[1:])
        for row in conn.execute(
            "SELECT path, size, mtime_ns, inode, ctime_ns FROM files WHERE mirror_id = ?", (mirror_id,)
        )
    }
    plan = plan_index(walked, known)
    report.files_seen += len(walked)
    report.files_unchanged += len(plan.unchanged)
    report.files_deleted += len(plan.deleted)
    with transaction(conn):
        write.delete_files(conn, mirror_id, plan.deleted)
        write.upsert_entries(conn, mirror_id, _entries(mroot, walked))
        conn.execute("DELETE FROM flags WHERE mirror_id = ? AND kind = 'walk_error'", (mirror_id,))
        for problem in problems:
            flag = Flag("walk_error", f"{problem.path}: {problem.detail}")
            write.insert_flags(conn, mirror_id, entry_for(problem.path, definition), None, [flag])
            report.count([flag])
    pattern = compile_rules(definition.secrets)
    to_read = plan.to_read
    progress.start(sum(st.size for st in to_read), len(to_read))
    ctx = _MirrorContext(conn, mirror_id, mroot.mirror, definition, pattern, report, progress, copy_cache)
    _read_files(ctx, [st for st in to_read if not (is_archive(st.path) and st.kind == "file")])
    archives = [st for st in to_read if is_archive(st.path) and st.kind == "file"]
    _read_archives(ctx, archives, workers)
    _compare_listings(ctx, walked, {st.path for st in to_read})
    with transaction(conn):
        write.mark_indexed(conn, mirror_id)
    progress.finish()


@dataclass
class _MirrorContext:
    conn: sqlite3.Connection
    mirror_id: int
    mirror: LocalMirror
    definition: MirrorDefinition
    pattern: re.Pattern[bytes]
    report: IndexReport
    progress: Progress
    copy_cache: Path | None = None  # vault index --optimize: seekable copies go here

    def source(self, st: FileStat) -> tuple[str, str, bytes | None]:
        """What a worker process needs to open the file itself."""
        return (self.mirror.root, st.path, st.raw_path)

    def copy_tmp(self, i: int) -> str | None:
        if self.copy_cache is None:
            return None
        folder = seekable_dir(self.copy_cache)
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder / f".indexing-{os.getpid()}-{i}.tmp")


def _entries(mroot: MirrorRoot, walked: list[FileStat]) -> list[tuple[Entry, bool]]:
    """Every top-level directory that the definition calls an entry, plus the manifest's, found or not."""
    definition = mroot.definition
    manifest = load_manifest(definition.manifest) if definition.manifest else {}
    on_disk = {name for name in mroot.mirror.top_dirs() if definition.is_entry(name)}
    on_disk |= {entry_of(st.path) for st in walked if definition.is_entry(entry_of(st.path))}
    rows = [
        (manifest.get(name) or Entry(definition.name, name, "", "", "", "", (), "", "{}"), True)
        for name in sorted(on_disk)
    ]
    rows += [(entry, False) for name, entry in sorted(manifest.items()) if name not in on_disk]
    rows.append((Entry(definition.name, "", "top level of the mirror", "", "", "", (), "", "{}"), True))
    return rows


def entry_for(path: str, definition: MirrorDefinition) -> str:
    entry = entry_of(path)
    return entry if definition.is_entry(entry) else ""


def _is_doc(path: str, size: int) -> bool:
    name = path.rsplit("/", 1)[-1]
    return size <= MAX_DOC and (name.endswith(".md") or name in DOC_NAMES)


def _read_plain(ctx: _MirrorContext, st: FileStat) -> tuple[str | None, list[Flag], str | None]:
    """BLAKE3, secrets found and doc text of one plain file, in one read (big files are hashed by mmap)."""
    if st.size > MAX_SCANNED_MEMBER:
        digest = ctx.mirror.hash(st.path, st.raw_path)
        ctx.progress.advance(st.size)
        return digest, [], None
    h, scanner, first = blake3.blake3(), None, True
    doc_parts: list[bytes] | None = [] if _is_doc(st.path, st.size) else None  # docs are small (≤ MAX_DOC)
    with ctx.mirror.open(st.path, st.raw_path) as fh:
        while chunk := fh.read(CHUNK):
            if first and worth_scanning(st.path.encode(), st.size, chunk):
                scanner = SecretScanner(ctx.pattern)
            first = False
            h.update(chunk)
            if scanner:
                scanner.feed(chunk)
            if doc_parts is not None:
                doc_parts.append(chunk)
            ctx.progress.advance(len(chunk))
    flags = [Flag("secret", hit.describe()) for hit in (scanner.hits if scanner else [])]
    doc = None
    if doc_parts is not None and scanner is not None:  # a text doc: stored with its secrets redacted
        doc = redact(b"".join(doc_parts).decode("utf-8", "replace"), ctx.pattern)
    return h.hexdigest(), flags, doc


def _read_files(ctx: _MirrorContext, files: list[FileStat]) -> None:
    for start in range(0, len(files), FILE_BATCH):
        rows = []
        for st in files[start : start + FILE_BATCH]:
            ctx.progress.current(st.path)
            if st.kind == "symlink":
                rows.append((st, None, [], None))
                continue
            try:
                digest, flags, doc = _read_plain(ctx, st)
            except OSError as exc:
                digest, flags, doc = None, [Flag("unreadable", f"cannot read: {exc.strerror}")], None
            rows.append((st, digest, flags, doc))
        with transaction(ctx.conn):
            for st, digest, flags, doc in rows:
                entry = entry_for(st.path, ctx.definition)
                file_id = write.insert_file(ctx.conn, ctx.mirror_id, entry, st, digest)
                write.insert_flags(ctx.conn, ctx.mirror_id, entry, file_id, flags)
                if doc is not None:
                    write.insert_doc(ctx.conn, file_id, doc)
                ctx.report.count(flags)
                ctx.report.files_read += 1
                ctx.report.bytes_read += st.size


# -- archives -------------------------------------------------------------------------------------------------
_shared_counter = None


def _init_worker(counter) -> None:
    global _shared_counter
    _shared_counter = counter


def _count_bytes(n: int) -> None:
    with _shared_counter.get_lock():
        _shared_counter.value += n


def scan_to_shard(
    source: tuple[str, str, bytes | None],
    shard_path: str,
    rules_pattern: bytes,
    on_bytes=None,
    copy_tmp: str | None = None,
) -> ArchiveScan:
    """One archive (source: mirror root, path, raw path) into a fresh shard file; the rest comes back as the
    result. With copy_tmp, a seekable copy is written from the same decompressed bytes, kept if needed."""
    shard = sqlite3.connect(shard_path, isolation_level=None)
    copy_fh = open(copy_tmp, "wb") if copy_tmp else None  # noqa: SIM115 - closed below
    writer = SeekableWriter(copy_fh) if copy_fh else None
    scan = None
    try:
        shard.execute("PRAGMA journal_mode = OFF")
        shard.execute("PRAGMA synchronous = OFF")
        shard.execute(write.SHARD_SCHEMA)
        shard.execute("BEGIN")
        try:
            on_raw = writer.write if writer else None
            root, path, raw = source
            mirror = open_mirror(root)
            opener = None if mirror.remote else partial(mirror.open, path, raw)
            with mirror.open(path, raw) as fh:
                scan = scan_archive(fh, shard, re.compile(rules_pattern), on_bytes, on_raw, opener)
        except OSError as exc:
            scan = ArchiveScan(status="unreadable")
            scan.flag("unreadable", f"cannot read: {exc.strerror}")
        shard.execute("COMMIT")
        if writer and scan.status == "ok" and needs_copy(scan.frames):
            scan.copy_frames = writer.close()
            copy_fh.flush()
            os.fsync(copy_fh.fileno())
            scan.copy_tmp = copy_tmp
        return scan
    finally:
        shard.close()
        if copy_fh:
            copy_fh.close()
            if scan is None or scan.copy_tmp is None:
                Path(copy_tmp).unlink(missing_ok=True)


def _pool_task(source: tuple, shard_path: str, rules_pattern: bytes, copy_tmp: str | None) -> ArchiveScan:
    return scan_to_shard(source, shard_path, rules_pattern, _count_bytes, copy_tmp)


def default_workers(n_archives: int) -> int:
    """2 processes when there are several archives and cores for them."""
    return 2 if n_archives >= 2 and (os.cpu_count() or 1) >= 2 else 1


def _read_archives(ctx: _MirrorContext, archives: list[FileStat], workers: int | None) -> None:
    if not archives:
        return
    # a remote mirror's connection cannot be shared by forked processes: one process reads it
    workers = 1 if ctx.mirror.remote else (workers or default_workers(len(archives)))
    catalog = Path(ctx.conn.execute("PRAGMA database_list").fetchone()[2])
    prefix = f".{catalog.name}.shards-"
    for stale in catalog.parent.glob(prefix + "*"):  # left by a killed run; we hold the writer lock
        shutil.rmtree(stale, ignore_errors=True)
    shard_dir = Path(tempfile.mkdtemp(prefix=prefix, dir=catalog.parent))
    try:
        if workers <= 1:
            for st in archives:
                ctx.progress.current(st.path)
                shard = str(shard_dir / "inline.db")
                scan = scan_to_shard(ctx.source(st), shard, ctx.pattern.pattern, ctx.progress.advance, ctx.copy_tmp(0))
                _commit_archive(ctx, st, scan, shard)
                os.unlink(shard)
        else:
            _read_archives_pool(ctx, archives, workers, shard_dir)
    finally:
        shutil.rmtree(shard_dir, ignore_errors=True)


def _read_archives_pool(ctx: _MirrorContext, archives: list[FileStat], workers: int, shard_dir: Path) -> None:
    import multiprocessing  # only when there is a pool: the CLI starts faster without it
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    mp = multiprocessing.get_context("fork")
    counter = mp.Value("q", 0)
    pending: dict = {}  # future -> (file, shard path)
    seen = 0
    with ProcessPoolExecutor(workers, mp_context=mp, initializer=_init_worker, initargs=(counter,)) as pool:
        try:
            for i, st in enumerate(archives):
                shard = str(shard_dir / f"{i}.db")
                fut = pool.submit(_pool_task, ctx.source(st), shard, ctx.pattern.pattern, ctx.copy_tmp(i))
                pending[fut] = (st, shard)
            while pending:
                done, _ = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                with counter.get_lock():
                    now = counter.value
                ctx.progress.advance(now - seen)
                seen = now
                for fut in done:
                    st, shard = pending.pop(fut)
                    ctx.progress.current(st.path)
                    scan = fut.result()
                    _commit_archive(ctx, st, scan, shard)
                    Path(shard).unlink(missing_ok=True)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _commit_archive(ctx: _MirrorContext, st: FileStat, scan: ArchiveScan, shard: str) -> None:
    """The archive's file row, archive row, frames, members and flags: one transaction."""
    entry = entry_for(st.path, ctx.definition)
    have_shard = os.path.exists(shard)
    if have_shard:
        ctx.conn.execute("ATTACH DATABASE ? AS shard", (shard,))
    try:
        with transaction(ctx.conn):
            file_id = write.insert_file(ctx.conn, ctx.mirror_id, entry, st, scan.blake3 or None)
            if have_shard:
                archive_id = write.insert_archive(
                    ctx.conn,
                    file_id,
                    status=scan.status,
                    raw_size=scan.raw_size,
                    member_count=scan.member_count,
                    frames=scan.frames,
                    shard_alias="shard",
                )
            write.insert_flags(ctx.conn, ctx.mirror_id, entry, file_id, scan.flags)
            if scan.copy_tmp and have_shard:
                final = seekable_copy_path(ctx.copy_cache, scan.blake3)
                write.insert_copy(ctx.conn, archive_id, Path(scan.copy_tmp), final, scan.copy_frames)
    finally:
        if scan.copy_tmp:
            Path(scan.copy_tmp).unlink(missing_ok=True)
        if have_shard:
            ctx.conn.execute("DETACH DATABASE shard")
    ctx.report.count(scan.flag_counts)
    ctx.report.archives_read += 1
    ctx.report.files_read += 1
    ctx.report.members_indexed += scan.member_count
    ctx.report.bytes_read += st.size


def _compare_listings(ctx: _MirrorContext, walked: list[FileStat], read_now: set[str]) -> None:
    """Each archive with a .tar.zst.list beside it: do the listing and the members agree?"""
    paths = {st.path: st for st in walked}
    for path in sorted(p for p in paths if is_archive(p)):
        listing = listing_for(path)
        if listing not in paths or not ({path, listing} & read_now):
            continue
        row = ctx.conn.execute(
            "SELECT a.id, f.id FROM archives a JOIN files f ON f.id = a.file_id WHERE f.mirror_id = ? AND f.path = ?",
            (ctx.mirror_id, path),
        ).fetchone()
        if row is None:
            continue
        archive_id, file_id = row
        members = [r[0] for r in ctx.conn.execute("SELECT path FROM members WHERE archive_id = ?", (archive_id,))]
        try:
            with ctx.mirror.open(listing, paths[listing].raw_path) as fh:
                listed = parse_listing(fh.read())
        except OSError:
            continue
        missing, extra = compare_listing(listed, members)
        entry = entry_for(path, ctx.definition)
        with transaction(ctx.conn):
            ctx.conn.execute("DELETE FROM flags WHERE file_id = ? AND kind = 'list_mismatch'", (file_id,))
            write.set_list_status(ctx.conn, archive_id, "mismatch" if missing or extra else "match")
            if missing or extra:
                detail = (
                    f"{listing.rsplit('/', 1)[-1]} lists {len(missing)} path(s) not in the archive "
                    f"(e.g. {missing[:3]}) and omits {len(extra)} member(s) (e.g. {extra[:3]})"
                )
                flag = Flag("list_mismatch", detail)
                write.insert_flags(ctx.conn, ctx.mirror_id, entry, file_id, [flag])
                ctx.report.count([flag])
