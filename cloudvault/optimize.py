"""Seekable copies of single-frame archives: the same decompressed bytes re-cut into independent ~4 MiB frames.

The copy lives in the cache folder beside the catalog (never in the mirror); members keep their offsets and
BLAKE3, so extraction reads the copy's few covering frames instead of everything before the member.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import BinaryIO

import zstandard

from cloudvault.archive.zstdframes import FrameStream
from cloudvault.catalog.db import transaction
from cloudvault.catalog.query import entry_filter
from cloudvault.errors import IntegrityError, StaleArchive
from cloudvault.mirrorfs import open_mirror
from cloudvault.models import Frame

FRAME_RAW = 4 << 20
LEVEL = 3


class SeekableWriter:
    """Raw bytes in, independent zstd frames of FRAME_RAW decompressed bytes out (each with its checksum)."""

    def __init__(self, fh, frame_raw: int = FRAME_RAW, level: int = LEVEL) -> None:
        self._fh = fh
        self._frame_raw = frame_raw
        self._cctx = zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
        self._buf = bytearray()
        self._comp = 0
        self._raw = 0
        self.frames: list[Frame] = []

    def write(self, data: bytes) -> None:
        self._buf += data
        while len(self._buf) >= self._frame_raw:
            self._emit(bytes(self._buf[: self._frame_raw]))
            del self._buf[: self._frame_raw]

    def _emit(self, raw: bytes) -> None:
        comp = self._cctx.compress(raw)
        self._fh.write(comp)
        self.frames.append(Frame(self._comp, len(comp), self._raw, len(raw)))
        self._comp += len(comp)
        self._raw += len(raw)

    def close(self) -> list[Frame]:
        if self._buf:
            self._emit(bytes(self._buf))
            self._buf.clear()
        return self.frames


def needs_copy(frames: list[Frame]) -> bool:
    """Worth a copy: some frame holds far more than one seekable frame would (e.g. `zstd -T0`'s single frame)."""
    return bool(frames) and max(f.raw_size for f in frames) > 2 * FRAME_RAW


def copy_path(cache: Path, archive_blake3: str) -> Path:
    return cache / "seekable" / f"{archive_blake3}.tar.zst"


def tmp_copy_path(final: Path) -> Path:
    return final.with_name(f".{final.name}.{os.getpid()}.tmp")


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


def record_copy(conn: sqlite3.Connection, archive_id: int, tmp: Path, final: Path, frames: list[Frame]) -> None:
    """Rename the copy into place and record it with its frame table, in one transaction."""
    with transaction(conn):
        insert_copy(conn, archive_id, tmp, final, frames)


def insert_copy(conn: sqlite3.Connection, archive_id: int, tmp: Path, final: Path, frames: list[Frame]) -> None:
    """The copy's rows, inside the caller's transaction; the file is renamed into place last."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    conn.execute("DELETE FROM seekable WHERE archive_id = ?", (archive_id,))
    conn.execute(
        "INSERT INTO seekable(archive_id, path, comp_size, frame_count, created_at) VALUES (?,?,?,?,?)",
        (archive_id, str(final), tmp.stat().st_size, len(frames), now),
    )
    conn.executemany(
        "INSERT INTO seekable_frames(archive_id, idx, comp_offset, comp_size, raw_offset, raw_size) "
        "VALUES (?,?,?,?,?,?)",
        [(archive_id, i, f.comp_offset, f.comp_size, f.raw_offset, f.raw_size) for i, f in enumerate(frames)],
    )
    os.replace(tmp, final)


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
    for path in (cache / "seekable").glob("*.tar.zst"):
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
        final = copy_path(cache, digest)
        tmp = tmp_copy_path(final)
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
