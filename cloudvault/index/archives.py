"""Index tar archives (.tar.zst and the other formats of archive/formats.py): each is scanned (by a worker process
when there are several) into a shard file of its members, then committed with its frames and flags in one
transaction."""

from __future__ import annotations

import contextlib
import itertools
import operator
import os
import shutil
import signal
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from cloudvault.archive.formats import HEAD, archive_format
from cloudvault.archive.scan import ArchiveScan, MemberRecord, ScanResult
from cloudvault.archive.seekable import SeekableWriter, needs_copy, open_private
from cloudvault.archive.zip import ZipScan, is_zip_name
from cloudvault.catalog import copies, generations, shards
from cloudvault.catalog import files as catalog_files
from cloudvault.catalog.copies import copies_of_files
from cloudvault.catalog.db import catalog_file, transaction
from cloudvault.config import seekable_copy_path, seekable_dir
from cloudvault.index import versions
from cloudvault.index.budget import Budget, plan_budget
from cloudvault.index.context import DAMAGE, MirrorContext
from cloudvault.index.salvage import damage_flags
from cloudvault.index.secrets import SecretRules
from cloudvault.models import FileStat, Flag, Frame
from cloudvault.tools.mirrorfs import open_mirror


@dataclass
class ShardOutcome:
    """What a worker hands back besides the shard file (which holds the scan): the seekable copy it wrote."""

    copy_tmp: str | None = None  # a seekable copy written in the same pass (vault index --optimize)
    copy_frames: list[Frame] = field(default_factory=list)


NAME_BATCH = 1000  # member names checked for secrets together: one literal search for a thousand names
PATH, LINK_TARGET = operator.itemgetter(0), operator.itemgetter(10)  # of a MemberRecord


def redacted(records: Iterable[MemberRecord], rules: SecretRules, scan: ScanResult) -> Iterator[MemberRecord]:
    """Member records whose name or link target holds a credential, stored with it redacted (and flagged). Names
    are checked a batch at a time: a batch whose names hold none of the rules' literals is passed on whole."""
    it = iter(records)
    while batch := list(itertools.islice(it, NAME_BATCH)):
        names = "\n".join(itertools.chain(map(PATH, batch), filter(None, map(LINK_TARGET, batch))))
        if not rules.may_match(names.encode("utf-8", "surrogateescape")):
            yield from batch
            continue
        for rec in batch:
            yield _redacted(rec, rules, scan)


def _redacted(rec: MemberRecord, rules: SecretRules, scan: ScanResult) -> MemberRecord:
    found = rules.found_in(rec.path) + (rules.found_in(rec.link_target) if rec.link_target else [])
    if not found:
        return rec
    scan.flag("secret", f"{', '.join(sorted(set(found)))} in the member's name or link (stored redacted)",
              rules.redact(rec.path))  # fmt: skip
    raw = rules.redact_bytes(rec.raw_path) if rec.raw_path is not None else None
    link = rules.redact(rec.link_target) if rec.link_target else rec.link_target
    raw_link = rules.redact_bytes(rec.raw_link_target) if rec.raw_link_target is not None else None
    return rec._replace(path=rules.redact(rec.path), raw_path=raw, link_target=link, raw_link_target=raw_link)


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """The cycle collector run less often while an archive is scanned: a scan makes a few short-lived tuples and
    lists per member (headers, records, batches), none in a cycle, and with Python's default (a collection every
    700 new containers) it walked them over and over: ~8% of indexing 200,000 small members."""
    import gc

    thresholds = gc.get_threshold()
    gc.set_threshold(SCAN_COLLECT_EVERY, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


SCAN_COLLECT_EVERY = 100_000


@_fewer_collections()
def scan_into(  # noqa: PLR0913 (keywords only past rules, each one optional)
    shard: sqlite3.Connection, root: str, st: FileStat, rules: SecretRules, *, on_bytes=None,
    writer: SeekableWriter | None = None, decoders: int = 2, fmt: str | None = None,
) -> ScanResult:  # fmt: skip
    """One archive of the mirror at root scanned into an open shard: its members as they come, then its row
    (signature, outcome, frames, flags). A worker never opens the catalog; `commit_archive` reads this back.
    decoders: the cores the archive's frames are decoded (and its bytes hashed) on; fmt: its format as the walk's
    sniff found it (None: its first bytes are read here to find it)."""
    first = shards.last_member(shard) + 1
    try:
        mirror = open_mirror(root)
        opener = None if mirror.remote else partial(mirror.open, st.path, st.raw_path)
        with mirror.open(st.path, st.raw_path) as fh:
            if fmt is None:
                fmt = archive_format(fh.read(HEAD), st.path) or "tar.zst"
                fh.seek(0)
            if fmt == "zip":  # read through its central directory, member by member
                scan = ZipScan(fh, inspect=rules.scanner, prefilter=rules.may_match, on_bytes=on_bytes)
            else:
                scan = ArchiveScan(fh, inspect=rules.scanner, prefilter=rules.may_match, on_bytes=on_bytes,
                                   on_raw=writer.write if writer else None, opener=opener, decoders=decoders,
                                   fmt=fmt)  # fmt: skip
            with shards.MemberRows(shard) as rows, contextlib.closing(iter(scan)) as records:
                rows.add_all(redacted(records, rules, scan.result))
        result = scan.result
        for damage in result.damaged:  # decoded from a frame whose checksum failed: no byte of them is handed out
            where = f"in frame {damage.frame} at compressed offset {damage.comp_offset}, which does not decode"
            for path in shards.members_within(shard, first, damage.raw_start, damage.raw_end):
                result.flag("damaged_member", where, path)
        result.flags = [  # a detail can quote a name or link target ("symlink to '...' points outside")
            f._replace(detail=rules.redact(f.detail), member=f.member and rules.redact(f.member)) for f in result.flags
        ]
    except OSError as exc:
        shards.drop_members_from(shard, first)  # an unreadable archive keeps no half of its members
        result = ScanResult(status="unreadable")
        result.flag("unreadable", f"cannot read: {exc.strerror}")
    shards.add_archive(shard, root, st, result, first)
    return result


def scan_to_shard(
    source: tuple[str, FileStat],
    shard_path: str,
    rules: dict[str, str],
    on_bytes=None,
    copy_tmp: str | None = None,
    decoders: int = 2,
    fmt: str | None = None,
) -> ShardOutcome:
    """One archive (source: mirror root, its walked stat) into a fresh shard file of its own, decoded on decoders
    cores; fmt: its format, as the walk found it. With copy_tmp, a seekable copy is written from the same
    decompressed bytes, kept if needed."""
    shard = shards.open_shard(shard_path)
    copy_fh = open_private(copy_tmp) if copy_tmp and not is_zip_name(source[1].path) else None  # a zip: no copy
    writer = SeekableWriter(copy_fh) if copy_fh else None
    outcome = None
    try:
        scan = scan_into(shard, *source, SecretRules(rules), on_bytes=on_bytes, writer=writer, decoders=decoders,
                         fmt=fmt)  # fmt: skip
        shards.finish_shard(shard)
        outcome = ShardOutcome()
        if writer and scan.status == "ok" and needs_copy(scan.frames):
            outcome.copy_frames = writer.close()
            copy_fh.flush()
            os.fsync(copy_fh.fileno())
            outcome.copy_tmp = copy_tmp
        return outcome
    finally:
        shard.close()
        if copy_fh:
            copy_fh.close()
            if outcome is None or outcome.copy_tmp is None:
                Path(copy_tmp).unlink(missing_ok=True)


# -- worker processes -----------------------------------------------------------------------------------------
_shared_counter = None  # compressed bytes read by all workers (the progress bar)
_unfinished = None  # archives of the run not finished yet: an archive started late gets the cores others left
_budget: Budget | None = None
STOPPING = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _init_worker(counter, unfinished, budget: Budget) -> None:
    global _shared_counter, _unfinished, _budget
    _shared_counter, _unfinished, _budget = counter, unfinished, budget
    # Ctrl-C and a closed terminal reach the whole process group: the parent alone answers them (one line) and
    # ends the workers (_stop_workers); SIGTERM ends a worker at once, as it did before vault's handlers
    for sig, handler in ((signal.SIGINT, signal.SIG_IGN), (signal.SIGHUP, signal.SIG_IGN),
                         (signal.SIGTERM, signal.SIG_DFL)):  # fmt: skip
        signal.signal(sig, handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)  # blocked while the parent forked this worker


def _stop_workers(ctx: MirrorContext, multiprocessing) -> None:
    """The pool's workers ended now (a Ctrl-C or a signal stopped the run): none goes on reading an archive
    nobody will commit, and the seekable copies they had begun are removed (the shards go with their folder)."""
    for child in multiprocessing.active_children():
        child.terminate()
    for child in multiprocessing.active_children():
        child.join(5)
    if ctx.copy_cache is not None:
        for tmp in seekable_dir(ctx.copy_cache).glob(f".indexing-{os.getpid()}-*.tmp"):
            tmp.unlink(missing_ok=True)


def _count_bytes(n: int) -> None:
    with _shared_counter.get_lock():
        _shared_counter.value += n


def _pool_task(source: tuple, shard_path: str, rules: dict[str, str], copy_tmp: str | None,
               fmt: str | None) -> ShardOutcome:  # fmt: skip
    try:
        return scan_to_shard(source, shard_path, rules, _count_bytes, copy_tmp, _budget.decoders(_unfinished.value),
                             fmt)  # fmt: skip
    finally:
        with _unfinished.get_lock():
            _unfinished.value -= 1


def read_archives(ctx: MirrorContext, archives: list[FileStat], workers: int | None,
                  formats: dict[str, str] | None = None) -> None:  # fmt: skip
    """Every archive scanned and committed, one transaction each; shards live beside the catalog meanwhile.
    workers: the cores to use (None: those present, as memory allows; see index/budget.py); formats: path -> the
    format the walk's sniff found (archive/formats.py), so that an archive's first bytes are not read again for it."""
    formats = formats or {}
    if not archives:
        return
    # a remote mirror's connection cannot be shared by forked processes: one process reads it
    budget = plan_budget(1 if ctx.mirror.remote else workers)
    catalog = catalog_file(ctx.conn)
    prefix = f".{catalog.name}.shards-"
    for stale in catalog.parent.glob(prefix + "*"):  # left by a killed run; we hold the writer lock
        shutil.rmtree(stale, ignore_errors=True)
    shard_dir = Path(tempfile.mkdtemp(prefix=prefix, dir=catalog.parent))
    try:
        if budget.processes(len(archives)) <= 1:
            for i, st in enumerate(archives):
                ctx.progress.current(st.path)
                shard = str(shard_dir / "inline.db")
                outcome = scan_to_shard((ctx.mirror.root, st), shard, ctx.rules.rules, ctx.progress.advance,
                                        ctx.copy_tmp(0), budget.decoders(len(archives) - i),
                                        formats.get(st.path))  # fmt: skip
                commit_archive(ctx, st, outcome, shard)
                os.unlink(shard)
        else:
            _read_archives_pool(ctx, archives, budget, shard_dir, formats)
    finally:
        shutil.rmtree(shard_dir, ignore_errors=True)


def _read_archives_pool(ctx: MirrorContext, archives: list[FileStat], budget: Budget, shard_dir: Path,
                        formats: dict[str, str]) -> None:  # fmt: skip
    import multiprocessing  # only when there is a pool: the CLI starts faster without it
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    from cloudvault.processes import worker_context

    # forked where this process runs no other thread (a CLI run); else from a fresh process, which inherits the
    # stopping signals blocked below as a forked worker does (it is started at the first submit)
    mp = worker_context(["cloudvault.index.archives"])
    counter, unfinished = mp.Value("q", 0), mp.Value("q", len(archives))
    pending: dict = {}  # future -> (file, shard path)
    seen = 0
    processes = budget.processes(len(archives))
    with ProcessPoolExecutor(processes, mp_context=mp, initializer=_init_worker,
                             initargs=(counter, unfinished, budget)) as pool:  # fmt: skip
        try:
            # largest first: a big archive started last would keep one core busy alone at the end
            signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)  # a worker forked now answers them once it is set up
            try:
                for i, st in sorted(enumerate(archives), key=lambda pair: -pair[1].size):
                    shard = str(shard_dir / f"{i}.db")
                    fut = pool.submit(_pool_task, (ctx.mirror.root, st), shard, ctx.rules.rules, ctx.copy_tmp(i),
                                      formats.get(st.path))  # fmt: skip
                    pending[fut] = (st, shard)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)
            while pending:
                done, _ = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                with counter.get_lock():
                    now = counter.value
                ctx.progress.advance(now - seen)
                seen = now
                for fut in done:
                    st, shard = pending.pop(fut)
                    ctx.progress.current(st.path)
                    commit_archive(ctx, st, fut.result(), shard)
                    Path(shard).unlink(missing_ok=True)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            _stop_workers(ctx, multiprocessing)
            raise


def commit_archive(ctx: MirrorContext, st: FileStat, outcome: ShardOutcome, shard: str) -> None:
    """The archive's file row, archive row, frames, members and flags, as its shard recorded them: one
    transaction. The shard may hold other archives too (a Slurm task's)."""
    entry = ctx.entry_for(st.path)
    old_copies = copies_of_files(ctx.conn, ctx.mirror_id, [st.path])
    try:
        with shards.attached_shard(ctx.conn, shard) as alias:
            scan, rows = recorded_scan(ctx.conn, alias, ctx.mirror.root, st.path)
            ctx.progress.phase(f"writing {scan.member_count:,} members to the catalog and search index: {st.path}")
            if scan.status != "unreadable" and ctx.changed_since_walk(st):
                scan.flag("changed_while_indexing", "size or mtime changed while it was read; read again next run")
            version = versions.judged(ctx, st, scan.blake3 or None, scan.status, scan.flags)
            if version.kept:  # its recorded members stay; the damage is said in flags
                _keep_recorded_archive(ctx, version, scan, alias, rows)
                return
            with transaction(ctx.conn):
                insert = partial(catalog_files.insert_file, ctx.conn, ctx.mirror_id, entry, st, scan.blake3 or None,
                                 scan.pieces)  # fmt: skip
                file_id = versions.record_new(ctx, version, insert)
                catalog_files.insert_flags(ctx.conn, ctx.mirror_id, entry, file_id, scan.flags)
                archive_id = catalog_files.insert_archive(ctx.conn, file_id, scan, alias, rows)
                if outcome.copy_tmp:
                    final = seekable_copy_path(ctx.copy_cache, scan.blake3)
                    copies.insert_copy(ctx.conn, archive_id, Path(outcome.copy_tmp), final, outcome.copy_frames)
    finally:
        if outcome.copy_tmp:
            Path(outcome.copy_tmp).unlink(missing_ok=True)
    ctx.remove_unrecorded(old_copies)
    ctx.report.count(scan.flag_counts)
    ctx.report.count_limits(st.path, scan.flags)
    if scan.status == "unsupported":  # an encrypted zip: kept whole, named in the summary with .rar and .7z
        label = "encrypted " + (Path(st.path).suffix.lower() or "zip")
        ctx.report.not_opened[label] = ctx.report.not_opened.get(label, 0) + 1
    ctx.report.archives_read += 1
    ctx.report.files_read += 1
    ctx.report.members_indexed += scan.member_count
    ctx.report.bytes_read += st.size


def _keep_recorded_archive(ctx: MirrorContext, version: versions.Version, scan: ScanResult, alias: str,
                           rows: tuple[int, int]) -> None:  # fmt: skip
    """An archive changed in place or damaged: the recorded members, frames and hash stay; which frames and members
    the change reaches is flagged (a file that cannot be read at all is read again next run): the members the new
    scan read with other bytes, and those the frames that no longer decode took."""
    flags = [f for f in scan.flags if f.kind in catalog_files.RETRY_KINDS]
    if version.verdict != "unreadable":
        flags += damage_flags(ctx.conn, ctx.mirror, version.st, version.old)
        named = {f.member for f in flags}
        flags += [Flag("damaged_member", f"its bytes changed in place (BLAKE3 {now[:16]}, recorded {was[:16]})", path)
                  for path, was, now in generations.members_changed(ctx.conn, alias, rows, version.old.archive_id)
                  if path not in named]  # fmt: skip
    if version.verdict == "damaged" and not any(f.kind == "damaged_frame" for f in flags):
        found = "; ".join(f.detail for f in scan.flags if f.kind in DAMAGE)  # past the recorded frames: bytes added
        flags.append(Flag("damaged_frame", f"{found}; every recorded frame still decodes as recorded"))
    with transaction(ctx.conn):
        versions.keep_recorded(ctx, version, flags)
    ctx.report.archives_read += 1
    ctx.report.files_read += 1
    ctx.report.bytes_read += version.st.size


def recorded_scan(conn: sqlite3.Connection, alias: str, root: str, path: str) -> tuple[ScanResult, tuple[int, int]]:
    """The scan result a shard recorded for one archive, and the rowid range of its members there."""
    found = shards.shard_scan(conn, alias, root, path)
    if found is None:  # the shard was made for this archive (checked before a merge): a bug if not
        raise LookupError(f"the shard holds no scan of {path}")
    rows = found.pop("rows")
    return ScanResult(**found), rows
