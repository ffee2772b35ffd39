"""Seekable copies of single-frame archives: the same decompressed bytes re-cut into independent ~4 MiB frames.

The copy lives in the cache folder beside the catalog (never in the mirror), 0600 in 0700 folders since it holds
the mirror's data; members keep their offsets and BLAKE3, so extraction reads the copy's few covering frames
instead of everything before the member. Only copies the catalog records are ever removed.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import BinaryIO

from cloudvault.archive.seekable import SeekableWriter, needs_copy, open_private, private_folder
from cloudvault.archive.zip import is_zip_name
from cloudvault.archive.zstdframes import FrameStream
from cloudvault.atomic import temp_name
from cloudvault.catalog.copies import copy_bytes_used, copy_candidates, forget_missing_copies, record_copy
from cloudvault.catalog.lookup import frame_table
from cloudvault.config import seekable_copy_path
from cloudvault.errors import IntegrityError, StaleArchive
from cloudvault.models import Frame
from cloudvault.tools.mirrorfs import open_mirror


def write_copy(opener: Callable[[], BinaryIO], tmp: Path, on_bytes: Callable[[int], None] | None = None) -> list[Frame]:
    """Decompress the archive and write its seekable copy to tmp (fsynced); the frame table of the copy."""
    private_folder(tmp.parent)
    with opener() as src, open_private(tmp) as out:
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
    forgotten: int = 0  # rows of copies whose file had been deleted by hand
    multi_frame: int = 0  # archives of the scope already entered at a frame: no copy needed
    small: int = 0  # single-frame archives small enough to read whole: no copy needed
    bytes_used: int = 0

    def to_json(self) -> dict:
        return asdict(self)


def optimize(
    conn: sqlite3.Connection,
    cache: Path,
    scope: tuple[int, str] | None = None,
    max_bytes: int | None = None,
    on_archive: Callable[[str], None] | None = None,
) -> OptimizeReport:
    """A seekable copy of every single-frame archive in scope, within max_bytes of cache space (never in a mirror)."""
    from cloudvault.catalog.mirror_guard import refuse_write_into_mirror

    refuse_write_into_mirror(conn, cache, "seekable copies under")
    report = OptimizeReport(forgotten=forget_missing_copies(conn))
    used = copy_bytes_used(conn)
    for c in copy_candidates(conn, scope):
        frames = frame_table(conn, c.archive_id)
        if not needs_copy(frames) or is_zip_name(c.path):  # a zip's frames are its members: random access already
            if len(frames) > 1:
                report.multi_frame += 1
            else:
                report.small += 1
            continue
        if max_bytes is not None and used + c.size > max_bytes:
            report.skipped.append({"archive": c.path, "why": f"--max-gb budget ({used} of {max_bytes} bytes used)"})
            continue
        mirror = open_mirror(c.root)
        if mirror.stat(c.path, c.raw_path) != (c.size, c.mtime_ns):
            raise StaleArchive(path=c.path, what="changed or gone since indexing", entry=c.entry_id)
        if on_archive:
            on_archive(c.path)
        final = seekable_copy_path(cache, c.blake3)
        tmp = temp_name(final)
        try:
            copy_frames = write_copy(partial(mirror.open, c.path, c.raw_path), tmp)
            if sum(f.raw_size for f in copy_frames) != sum(f.raw_size for f in frames):
                raise IntegrityError(detail=f"{c.path}: the copy's size differs from the indexed archive")
            record_copy(conn, c.archive_id, tmp, final, copy_frames)
        finally:
            tmp.unlink(missing_ok=True)
        used += final.stat().st_size
        report.written.append({"archive": c.path, "copy": str(final), "bytes": final.stat().st_size,
                               "frames": len(copy_frames)})  # fmt: skip
    report.bytes_used = used
    return report
