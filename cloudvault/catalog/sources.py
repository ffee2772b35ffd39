"""Where an indexed archive's bytes are read from now: its seekable copy, else the mirror (checked unchanged)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from functools import partial
from typing import BinaryIO

from cloudvault.errors import IntegrityError, StaleArchive
from cloudvault.mirrorfs import open_mirror
from cloudvault.models import Frame


def archive_source(conn: sqlite3.Connection, file_id: int) -> tuple[Callable[[], BinaryIO], list[Frame]]:
    """How to open the archive to read members from, and its frame table: the seekable copy if there is one,
    else the original. The original must be as indexed (size, mtime), or the catalog's offsets are not trusted."""
    row = conn.execute(
        "SELECT a.id, f.size, f.mtime_ns, a.status, f.path, f.raw_path, f.entry_id, m.root FROM archives a "
        "JOIN files f ON f.id = a.file_id JOIN mirrors m ON m.id = f.mirror_id WHERE f.id = ?",
        (file_id,),
    ).fetchone()
    archive_id, size, mtime, status, path, raw, entry, root = row
    if status != "ok":
        raise IntegrityError(detail=f"{path} was flagged {status} when indexed; its members cannot be trusted")
    mirror = open_mirror(root)
    now = mirror.stat(path, raw)
    if now is not None and now != (size, mtime):
        what = f"size {size} -> {now[0]}" if now[0] != size else "mtime changed"
        raise StaleArchive(path=path, what=what, entry=entry)
    copy = conn.execute("SELECT path, comp_size FROM seekable WHERE archive_id = ?", (archive_id,)).fetchone()
    if copy and os.path.exists(copy[0]) and os.path.getsize(copy[0]) == copy[1]:
        return partial(open, copy[0], "rb"), _frame_rows(conn, "seekable_frames", archive_id)
    if now is None:
        raise IntegrityError(detail=f"{path} is gone from the mirror and has no seekable copy")
    return partial(mirror.open, path, raw), _frame_rows(conn, "frames", archive_id)


def _frame_rows(conn: sqlite3.Connection, table: str, archive_id: int) -> list[Frame]:
    sql = f"SELECT comp_offset, comp_size, raw_offset, raw_size FROM {table} WHERE archive_id = ? ORDER BY idx"
    return [Frame(*r) for r in conn.execute(sql, (archive_id,))]
