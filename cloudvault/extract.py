"""Pull members out of archives (and plain files out of the mirror) by seeking with the frame table, verified."""

from __future__ import annotations

import errno
import os
import posixpath
import sqlite3
import sys
from collections import namedtuple
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import BinaryIO

import blake3

from cloudvault.archive.paths import unsafe_reason
from cloudvault.archive.reader import ArchiveReader
from cloudvault.catalog.query import like_escape
from cloudvault.catalog.sources import archive_source
from cloudvault.errors import (
    AmbiguousMember,
    DestinationExists,
    HashMismatch,
    MemberNotFound,
    NoSpace,
    UnsafeMember,
    UsageError,
)
from cloudvault.mirrorfs import open_mirror
from cloudvault.progress import Progress

CHUNK = 1 << 20


class Target(
    namedtuple(
        "Target",
        "path type size mode mtime blake3 link_target archive source data_offset file_id",
        defaults=(0, None),
    )
):
    """One thing to write: a member of an archive (archive: its mirror path; file_id: its row in files), or a
    plain file of the mirror (archive None). path: the member path, or the file's path within its entry;
    source: the archive's mirror path, or for a plain file a callable that opens it."""

    __slots__ = ()


Written = namedtuple("Written", "path dest size blake3 archive")


class ExtractReport:
    """What was written, and how much was decompressed to write it (the measure of a good seek)."""

    def __init__(self, progress: Progress | None = None) -> None:
        self.written: list[Written] = []
        self.frames_read = 0
        self.bytes_decompressed = 0
        self.progress = progress or Progress()

    def to_json(self) -> dict:
        return {"written": [w._asdict() for w in self.written], "frames_read": self.frames_read,
                "bytes_decompressed": self.bytes_decompressed}  # fmt: skip


# -- finding what to extract -------------------------------------------------------------------------------------
MEMBER_SQL = (
    "SELECT mb.path, mb.type, mb.size, mb.mode, mb.mtime, mb.blake3, mb.link_target, f.path, mb.data_offset, "
    "f.id FROM members mb JOIN archives a ON a.id = mb.archive_id JOIN files f ON f.id = a.file_id "
    "WHERE f.mirror_id = ? AND f.entry_id = ?"
)


def _mirror_root(conn: sqlite3.Connection, mirror_id: int) -> str:
    return conn.execute("SELECT root FROM mirrors WHERE id = ?", (mirror_id,)).fetchone()[0]


def find_targets(
    conn: sqlite3.Connection, mirror_id: int, entry_id: str, query: str, archive: str | None = None
) -> list[Target]:
    """Exact path, a path through an archive (x.tar.zst/inner), a glob or directory, else a unique suffix."""
    if ".tar.zst/" in query and archive is None:
        archive_part, _, query = query.partition(".tar.zst/")
        archive = archive_part.rsplit("/", 1)[-1] + ".tar.zst"
    prefix = f"{entry_id}/" if entry_id else ""
    sql, args = MEMBER_SQL, [mirror_id, entry_id]
    if archive:
        sql += " AND (f.path LIKE ? ESCAPE '\\' OR f.path = ?)"
        args += [f"%/{like_escape(archive)}%", prefix + archive]
    query = query.strip("/")
    members = [r for r in conn.execute(sql + " AND mb.path = ?", [*args, query]) if r[1] != "dir"]
    files = [] if archive else _plain(conn, mirror_id, entry_id, "f.path = ?", [prefix + query])
    if members or files:
        candidates = [_member(r) for r in members] + files
        if len(candidates) > 1:
            raise AmbiguousMember(path=query, entry=entry_id, count=len(candidates), candidates=_names(candidates))
        return candidates
    if any(c in query for c in "*?["):
        glob = conn.execute(sql + " AND mb.path GLOB ? ORDER BY f.path, mb.data_offset", [*args, query]).fetchall()
        return [_member(r) for r in glob] + (
            [] if archive else _plain(conn, mirror_id, entry_id, "f.path GLOB ?", [prefix + query])
        )
    under = conn.execute(
        sql + " AND mb.path LIKE ? ESCAPE '\\' ORDER BY f.path, mb.data_offset", [*args, like_escape(query) + "/%"]
    ).fetchall()
    if under:
        return [_member(r) for r in under]
    suffix = conn.execute(sql + " AND mb.path LIKE ? ESCAPE '\\'", [*args, "%/" + like_escape(query)]).fetchall()
    candidates = [_member(r) for r in suffix]
    if not archive:
        candidates += _plain(conn, mirror_id, entry_id, "f.path LIKE ? ESCAPE '\\'", ["%/" + like_escape(query)])
    if len(candidates) == 1:
        return candidates
    if candidates:
        raise AmbiguousMember(path=query, entry=entry_id, count=len(candidates), candidates=_names(candidates))
    raise MemberNotFound(path=query, entry=entry_id, hint=_closest(conn, mirror_id, entry_id, query))


def _member(row: tuple) -> Target:
    path, mtype, size, mode, mtime, digest, link, archive, offset, file_id = row
    return Target(path, mtype, size, mode, mtime, digest, link, archive, archive, offset, file_id)


def _plain(conn: sqlite3.Connection, mirror_id: int, entry_id: str, where: str, args: list) -> list[Target]:
    mirror = open_mirror(_mirror_root(conn, mirror_id))
    prefix = f"{entry_id}/" if entry_id else ""
    rows = conn.execute(
        f"SELECT path, kind, size, mode, mtime_ns, blake3, link_target, raw_path FROM files f "
        f"WHERE f.mirror_id = ? AND f.entry_id = ? AND {where} ORDER BY path",
        [mirror_id, entry_id, *args],
    ).fetchall()
    return [
        Target(p[len(prefix) :], "file" if k == "file" else "symlink", s, m, t // 10**9, d, link, None,
               partial(mirror.open, p, raw))
        for p, k, s, m, t, d, link, raw in rows
    ]  # fmt: skip


def _names(targets: list[Target]) -> str:
    return ", ".join(f"{t.path} (in {t.archive.rsplit('/', 1)[-1]})" if t.archive else t.path for t in targets[:8])


def _closest(conn: sqlite3.Connection, mirror_id: int, entry_id: str, query: str) -> str:
    import difflib

    paths = [r[0] for r in conn.execute(MEMBER_SQL, (mirror_id, entry_id))]
    by_name = {posixpath.basename(p): p for p in paths}
    close = difflib.get_close_matches(posixpath.basename(query), list(by_name), n=3, cutoff=0.5)
    return f"; closest: {', '.join(by_name[c] for c in close)}" if close else ""


# -- writing ---------------------------------------------------------------------------------------------------
def _destination(target: Target, dest: Path, keep_path: bool) -> Path:
    reason = unsafe_reason(target.path, target.type, target.link_target if target.type == "hardlink" else None)
    if reason:
        raise UnsafeMember(path=target.path, why=reason + "; nothing was written")
    out = dest / (target.path if keep_path else posixpath.basename(target.path))
    if not os.path.realpath(out).startswith(os.path.realpath(dest) + os.sep):
        raise UnsafeMember(path=target.path, why="it would land outside the destination")
    return out


def _write_verified(chunks: Iterator[bytes], out: Path, target: Target, force: bool) -> str:
    """Write to a temp name beside out, hash every byte, fsync, and rename only if the hash matches."""
    if out.exists() and not force:
        raise DestinationExists(path=out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.vault-{os.getpid()}.tmp")
    h = blake3.blake3()
    try:
        with open(tmp, "wb") as fh:
            for chunk in chunks:
                h.update(chunk)
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        digest = h.hexdigest()
        if target.blake3 and digest != target.blake3:
            raise HashMismatch(path=target.path, expected=target.blake3, found=digest)
        os.chmod(tmp, target.mode & 0o777)
        os.utime(tmp, (target.mtime, target.mtime))
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise NoSpace(path=out) from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return digest


def _plain_chunks(opener: Callable[[], BinaryIO]) -> Iterator[bytes]:
    with opener() as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


def _link(target: Target, out: Path, dest: Path, allow_outside: bool, force: bool) -> None:
    resolved = os.path.normpath(os.path.join(os.path.dirname(out), target.link_target or ""))
    inside = resolved.startswith(os.path.realpath(dest) + os.sep) and not os.path.isabs(target.link_target or "")
    if not inside and not allow_outside:
        raise UnsafeMember(path=target.path, why=f"symlink to {target.link_target!r} points outside the destination "
                           "(--allow-outside-links to create it anyway)")  # fmt: skip
    if os.path.lexists(out):
        if not force:
            raise DestinationExists(path=out)
        os.unlink(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target.link_target, out)


def extract(
    conn: sqlite3.Connection,
    mirror_id: int,
    entry_id: str,
    targets: list[Target],
    dest: Path | None,
    *,
    keep_path: bool = False,
    force: bool = False,
    allow_outside_links: bool = False,
    progress: Progress | None = None,
) -> ExtractReport:
    """Write targets under dest (None: stdout), one forward pass per archive in offset order, each verified."""
    report = ExtractReport(progress)
    if dest is not None and not keep_path and len({posixpath.basename(t.path) for t in targets}) < len(targets):
        raise UsageError(detail="several members share a file name; pass --keep-path to keep their folders")
    by_path = {(t.archive, t.path): t for t in targets}
    readers: dict[str, ArchiveReader] = {}
    try:
        for target in sorted(targets, key=lambda t: (t.archive or "", t.data_offset)):
            if target.type == "dir":
                if dest is not None and keep_path and target.path != ".":
                    _destination(target, dest, True).mkdir(parents=True, exist_ok=True)
                continue
            report.written.append(_extract_one(conn, mirror_id, entry_id, target, dest, readers, by_path, report,
                                               keep_path, force, allow_outside_links))  # fmt: skip
    finally:
        for reader in readers.values():
            reader.close()
            report.frames_read += reader.frames_read
            report.bytes_decompressed += reader.bytes_decompressed
        report.progress.finish()
    return report


def _data_source(conn, mirror_id, entry_id, target: Target, readers, by_path, report) -> tuple[Target, Iterator[bytes]]:
    if target.archive is None:
        return target, _plain_chunks(target.source)
    if target.type == "hardlink":  # its data is its target's
        link = by_path.get((target.archive, target.link_target))
        if link is None:
            link = find_targets(conn, mirror_id, entry_id, target.link_target, target.archive.rsplit("/", 1)[-1])[0]
        target = Target(target.path, "file", link.size, target.mode or link.mode, target.mtime, link.blake3, None,
                        link.archive, link.source, link.data_offset, link.file_id)  # fmt: skip
    if target.type not in ("file",):
        raise UnsafeMember(path=target.path, why=f"{target.type} members are not extracted")
    reader = readers.get(target.archive)
    if reader is None:
        source, frames = archive_source(conn, target.file_id)
        reader = readers[target.archive] = ArchiveReader(source, frames, report.progress.advance)
    return target, reader.chunks(target.data_offset, target.size)


def _extract_one(conn, mirror_id, entry_id, target, dest, readers, by_path, report, keep_path, force, allow_outside):
    if dest is None:
        data_target, chunks = _data_source(conn, mirror_id, entry_id, target, readers, by_path, report)
        return Written(target.path, "-", data_target.size, _to_stdout(chunks, data_target), target.archive)
    out = _destination(target, dest, keep_path)
    if target.type == "symlink":
        _link(target, out, dest, allow_outside, force)
        return Written(target.path, str(out), 0, None, target.archive)
    data_target, chunks = _data_source(conn, mirror_id, entry_id, target, readers, by_path, report)
    digest = _write_verified(chunks, out, data_target, force)
    return Written(target.path, str(out), data_target.size, digest, target.archive)


def _to_stdout(chunks: Iterator[bytes], target: Target) -> str:
    """Bytes go out as they come (pipes want them); a mismatch found at the end still exits 5."""
    h = blake3.blake3()
    out = sys.stdout.buffer
    for chunk in chunks:
        h.update(chunk)
        out.write(chunk)
    out.flush()
    digest = h.hexdigest()
    if target.blake3 and digest != target.blake3:
        raise HashMismatch(path=target.path, expected=target.blake3, found=digest)
    return digest
