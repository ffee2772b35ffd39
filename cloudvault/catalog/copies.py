"""Reads and upkeep of seekable copies (`vault optimize`): which archives want one, and which copies exist."""

from __future__ import annotations

import os
import sqlite3
from collections import namedtuple
from datetime import UTC, datetime
from pathlib import Path

from cloudvault.catalog.db import transaction
from cloudvault.catalog.integrity import files_in_scope
from cloudvault.models import Frame

Candidate = namedtuple("Candidate", "archive_id file_id path raw_path size mtime_ns blake3 root entry_id")


def copy_candidates(conn: sqlite3.Connection, scope: tuple[int, str] | None) -> list[Candidate]:
    """Archives of the scope read whole and without a seekable copy yet, by path."""
    columns = ("a.id AS archive_id, f.id AS file_id, f.path, f.raw_path, f.size, f.mtime_ns, f.blake3, m.root, "
               "f.entry_id")
    rest = "JOIN archives a ON a.file_id = f.id WHERE a.status = 'ok' AND a.id NOT IN (SELECT archive_id FROM seekable)"
    return files_in_scope(conn, Candidate, columns, rest, scope)


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


def copies_of_files(conn: sqlite3.Connection, mirror_id: int, paths: list[str]) -> list[str]:
    """Seekable copies (paths in the cache) of these files' archives: vault's own files, to remove once the
    rows that name them are gone."""
    found = []
    for path in paths:
        found += [r[0] for r in conn.execute(
            "SELECT s.path FROM seekable s JOIN archives a ON a.id = s.archive_id JOIN files f ON f.id = a.file_id "
            "WHERE f.mirror_id = ? AND f.path = ?", (mirror_id, path))]  # fmt: skip
    return found


def copy_recorded(conn: sqlite3.Connection, path: str) -> bool:
    return conn.execute("SELECT 1 FROM seekable WHERE path = ?", (path,)).fetchone() is not None
