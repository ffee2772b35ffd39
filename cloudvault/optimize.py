"""Seekable copies of single-frame archives: the same decompressed bytes re-cut into independent ~4 MiB frames.

The copy lives in the cache folder beside the catalog (never in the mirror), 0600 in 0700 folders since it holds
the mirror's data; members keep their offsets and BLAKE3, so extraction reads the copy's few covering frames
instead of everything before the member. Only copies the catalog records are ever removed.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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
from cloudvault.documents import SHOWN_ONLY, Document
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


@dataclass(frozen=True)
class OptimizeRequest:
    """What `vault optimize` was asked: the catalog as named (None: $VAULT_CATALOG or the default), an entry (ID or
    prefix; None: every entry), the cache folder (None: beside the catalog) and the most cache space to use."""

    catalog: str | None
    entry: str | None = None
    to: str | None = None
    max_bytes: int | None = None


@dataclass(frozen=True)
class CopyWritten(Document):
    archive: str
    copy: str
    bytes: int
    frames: int


@dataclass(frozen=True)
class CopySkipped(Document):
    archive: str
    why: str


@dataclass(frozen=True)
class Optimized(Document):
    """`vault optimize`: the copies written, the archives skipped (over --max-gb), rows of copies deleted by hand
    forgotten, the archives needing no copy (multi-frame, or small), and the cache space used."""

    written: tuple[CopyWritten, ...]
    skipped: tuple[CopySkipped, ...]
    forgotten: int  # rows of copies whose file had been deleted by hand
    multi_frame: int  # archives of the scope already entered at a frame: no copy needed
    small: int  # single-frame archives small enough to read whole: no copy needed
    bytes_used: int
    cache: str = field(default="", metadata=SHOWN_ONLY)
    cache_made: bool = field(default=False, metadata=SHOWN_ONLY)  # whether the cache folder exists


@dataclass(frozen=True)
class CopyStatus(Document):
    archive: str
    archive_bytes: int
    copy: str
    copy_bytes: int
    frames: int
    created_at: str
    present: bool


@dataclass(frozen=True)
class CopiesStatus(Document):
    """`vault optimize --status`: every copy the catalog records and the cache space they use."""

    cache: str
    bytes_used: int
    copies: tuple[CopyStatus, ...]


def optimize_catalog(request: OptimizeRequest, on_archive: Callable[[str], None] | None = None) -> Optimized:
    """The catalog's archives in scope given seekable copies, under its writer lock."""
    from cloudvault.catalog.query import resolve_entry

    with _locked(request) as (conn, cache):
        scope = resolve_entry(conn, request.entry)[:2] if request.entry else None
        return optimize(conn, cache, scope, request.max_bytes, on_archive)


def copies_status(request: OptimizeRequest) -> CopiesStatus:
    """`vault optimize --status`: the copies the catalog records, each with whether its file is there."""
    from cloudvault.catalog.copies import copy_status

    with _locked(request) as (conn, cache):
        copies = tuple(CopyStatus(**row) for row in copy_status(conn))
        return CopiesStatus(str(cache), copy_bytes_used(conn), copies)


@contextlib.contextmanager
def _locked(request: OptimizeRequest) -> Iterator[tuple[sqlite3.Connection, Path]]:
    """The catalog (it must exist) opened under its writer lock, and the cache folder."""
    from cloudvault import config
    from cloudvault.catalog.db import open_catalog, refuse_non_catalog, writer_lock
    from cloudvault.errors import CatalogMissing

    where, origin = config.catalog_origin(request.catalog)
    path = Path(where)
    refuse_non_catalog(path, config.NAMED_BY[origin])  # before the lock: a wrong --catalog gets nothing beside it
    if not path.exists():
        raise CatalogMissing(path=path)
    cache = Path(request.to) if request.to else config.cache_dir(path)
    with writer_lock(path):
        conn = open_catalog(path, named_by=config.NAMED_BY[origin])
        try:
            yield conn, cache
        finally:
            conn.close()


def optimize(
    conn: sqlite3.Connection,
    cache: Path,
    scope: tuple[int, str] | None = None,
    max_bytes: int | None = None,
    on_archive: Callable[[str], None] | None = None,
) -> Optimized:
    """A seekable copy of every single-frame archive in scope, within max_bytes of cache space (never in a mirror)."""
    from cloudvault.catalog.mirror_guard import refuse_write_into_mirror

    refuse_write_into_mirror(conn, cache, "seekable copies under")
    forgotten, multi_frame, small = forget_missing_copies(conn), 0, 0
    written: list[CopyWritten] = []
    skipped: list[CopySkipped] = []
    used = copy_bytes_used(conn)
    for c in copy_candidates(conn, scope):
        frames = frame_table(conn, c.archive_id)
        if not needs_copy(frames) or is_zip_name(c.path):  # a zip's frames are its members: random access already
            multi_frame += len(frames) > 1
            small += len(frames) <= 1
            continue
        if max_bytes is not None and used + c.size > max_bytes:
            skipped.append(CopySkipped(c.path, f"--max-gb budget ({used} of {max_bytes} bytes used)"))
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
        written.append(CopyWritten(c.path, str(final), final.stat().st_size, len(copy_frames)))
    return Optimized(tuple(written), tuple(skipped), forgotten, multi_frame, small, used, str(cache), cache.exists())
