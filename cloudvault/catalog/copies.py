"""Reads and upkeep of seekable copies (`vault optimize`): which archives want one, and which copies exist."""

from __future__ import annotations

import os
import sqlite3
from collections import namedtuple

from cloudvault.catalog.db import transaction
from cloudvault.catalog.integrity import files_in_scope

Candidate = namedtuple("Candidate", "archive_id file_id path raw_path size mtime_ns blake3 root entry_id")


def copy_candidates(conn: sqlite3.Connection, scope: tuple[int, str] | None) -> list[Candidate]:
    """Archives of the scope read whole and without a seekable copy yet, by path."""
    sql = (
        "SELECT a.id, f.id, f.path, f.raw_path, f.size, f.mtime_ns, f.blake3, m.root, f.entry_id FROM archives a "
        "JOIN files f ON f.id = a.file_id JOIN mirrors m ON m.id = f.mirror_id "
        "WHERE a.status = 'ok' AND a.id NOT IN (SELECT archive_id FROM seekable)"
    )
    return [Candidate(*r) for r in files_in_scope(conn, sql, scope)]


def copy_bytes_used(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT coalesce(sum(comp_size), 0) FROM seekable").fetchone()[0]


def forget_missing_copies(conn: sqlite3.Connection) -> int:
    """Rows of copies whose file is gone (deleted by hand): dropped, so extraction reads the original. Files
    themselves are never removed here: a file the catalog does not name is not vault's to delete."""
    gone = [row[0] for row in conn.execute("SELECT archive_id, path FROM seekable") if not os.path.exists(row[1])]
    with transaction(conn):
        conn.executemany("DELETE FROM seekable WHERE archive_id = ?", [(a,) for a in gone])
    return len(gone)


def copy_status(conn: sqlite3.Connection) -> list[dict]:
    """Every copy with its archive, sizes, frame count, age, and whether its file is there."""
    rows = conn.execute(
        "SELECT f.path, f.size, s.path, s.comp_size, s.frame_count, s.created_at FROM seekable s "
        "JOIN archives a ON a.id = s.archive_id JOIN files f ON f.id = a.file_id ORDER BY f.path"
    )
    return [
        {"archive": a, "archive_bytes": n, "copy": c, "copy_bytes": cn, "frames": fc, "created_at": t,
         "present": os.path.exists(c)}
        for a, n, c, cn, fc, t in rows
    ]  # fmt: skip
