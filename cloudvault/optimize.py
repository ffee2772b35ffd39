"""Seekable copies of single-frame archives: the same decompressed bytes re-cut into independent ~4 MiB frames.

The copy lives in the cache folder beside the catalog (never in the mirror); members keep their offsets and
BLAKE3, so extraction reads the copy's few covering frames instead of everything before the member.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import BinaryIO

from cloudvault.archive.seekable import SeekableWriter, needs_copy
from cloudvault.archive.zstdframes import FrameStream
from cloudvault.atomic import temp_name
from cloudvault.catalog.db import transaction
from cloudvault.catalog.query import entry_filter
from cloudvault.catalog.write import record_copy
from cloudvault.config import seekable_copy_path, seekable_dir
from cloudvault.errors import IntegrityError, StaleArchive
from cloudvault.mirrorfs import open_mirror
from cloudvault.models import Frame


def write_copy(opener: Callable[[], BinaryIO], tmp: Path, on_bytes: Callable[[int], None] | None = None) -> list[Frame]:
    """Decompress the archive and write its seekable copy to tmp (fsynced); the frame table of the copy."""
    tmp.parent.mkdir(parents=True, exist_ok=True)
    with opener() as src, open(tmp, "wb") as out:
        writer = SeekableWriter(out)
        stream = FrameStream(src, on_compressed=(lambda c: on_bytes(len(c))) if on_bytes else None)
        while chunk := stream.read(1 << 20):
            writer.write(chunk)
        frames = writer.close()
        out.flush()
        os.fsync(out.fileno())
    return frames


@dataclass
class OptimizeReport:
    written: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    removed_orphans: int = 0
    bytes_used: int = 0

    def to_json(self) -> dict:
        return asdict(self)


def _candidates(conn: sqlite3.Connection, scope: tuple[int, str] | None) -> list[tuple]:
    sql = (
        "SELECT a.id, f.id, f.path, f.raw_path, f.size, f.mtime_ns, f.blake3, m.root, f.entry_id FROM archives a "
        "JOIN files f ON f.id = a.file_id JOIN mirrors m ON m.id = f.mirror_id "
        "WHERE a.status = 'ok' AND a.id NOT IN (SELECT archive_id FROM seekable)"
    )
    where, args = entry_filter("f", scope)
    return conn.execute(sql + where + " ORDER BY f.path", args).fetchall()


def _frames_of(conn: sqlite3.Connection, archive_id: int) -> list[Frame]:
    rows = conn.execute(
        "SELECT comp_offset, comp_size, raw_offset, raw_size FROM frames WHERE archive_id = ? ORDER BY idx",
        (archive_id,),
    )
    return [Frame(*r) for r in rows]


def bytes_used(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT coalesce(sum(comp_size), 0) FROM seekable").fetchone()[0]


def remove_orphans(conn: sqlite3.Connection, cache: Path) -> int:
    """Copies on disk that no catalog row names any more (their archive was re-indexed or deleted)."""
    known = {row[0] for row in conn.execute("SELECT path FROM seekable")}
    removed = 0
    for path in seekable_dir(cache).glob("*.tar.zst"):
        if str(path) not in known:
            path.unlink()
            removed += 1
    for row in conn.execute("SELECT archive_id, path FROM seekable").fetchall():
        if not os.path.exists(row[1]):
            with transaction(conn):
                conn.execute("DELETE FROM seekable WHERE archive_id = ?", row[:1])
    return removed


def optimize(
    conn: sqlite3.Connection,
    cache: Path,
    scope: tuple[int, str] | None = None,
    max_bytes: int | None = None,
    on_archive: Callable[[str], None] | None = None,
) -> OptimizeReport:
    """A seekable copy of every single-frame archive in scope, within max_bytes of cache space."""
    report = OptimizeReport(removed_orphans=remove_orphans(conn, cache))
    used = bytes_used(conn)
    for archive_id, _fid, path, raw, size, mtime, digest, root, entry in _candidates(conn, scope):
        if not needs_copy(_frames_of(conn, archive_id)):
            continue
        if max_bytes is not None and used + size > max_bytes:
            report.skipped.append({"archive": path, "why": f"--max-gb budget ({used} of {max_bytes} bytes used)"})
            continue
        mirror = open_mirror(root)
        if mirror.stat(path, raw) != (size, mtime):
            raise StaleArchive(path=path, what="changed or gone since indexing", entry=entry)
        if on_archive:
            on_archive(path)
        final = seekable_copy_path(cache, digest)
        tmp = temp_name(final)
        try:
            frames = write_copy(partial(mirror.open, path, raw), tmp)
            if sum(f.raw_size for f in frames) != sum(f.raw_size for f in _frames_of(conn, archive_id)):
                raise IntegrityError(detail=f"{path}: the copy's size differs from the indexed archive")
            record_copy(conn, archive_id, tmp, final, frames)
        finally:
            tmp.unlink(missing_ok=True)
        used += final.stat().st_size
        report.written.append({"archive": path, "copy": str(final), "bytes": final.stat().st_size,
                               "frames": len(frames)})  # fmt: skip
    report.bytes_used = used
    return report


def status(conn: sqlite3.Connection) -> list[dict]:
    rows = conn.execute(
        "SELECT f.path, f.size, s.path, s.comp_size, s.frame_count, s.created_at FROM seekable s "
        "JOIN archives a ON a.id = s.archive_id JOIN files f ON f.id = a.file_id ORDER BY f.path"
    )
    return [
        {"archive": a, "archive_bytes": n, "copy": c, "copy_bytes": cn, "frames": fc, "created_at": t,
         "present": os.path.exists(c)}
        for a, n, c, cn, fc, t in rows
    ]  # fmt: skip
