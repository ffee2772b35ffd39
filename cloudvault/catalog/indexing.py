"""Reads that `vault index` needs: what the catalog knew of a mirror's files, and an archive's members."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cloudvault.catalog.write import RETRY_KINDS

_RETRY = ",".join(f"'{kind}'" for kind in RETRY_KINDS)


def mirror_named(conn: sqlite3.Connection, name: str) -> int | None:
    row = conn.execute("SELECT id FROM mirrors WHERE name = ?", (name,)).fetchone()
    return row[0] if row else None


def known_files(conn: sqlite3.Connection, mirror_id: int) -> dict[str, tuple[int, int, int, int]]:
    """path -> (size, mtime_ns, inode, ctime_ns) as recorded; a file flagged unreadable or changed while being
    indexed gets an impossible signature, so the next run reads it again even when its stat is the same."""
    rows = conn.execute(
        "SELECT path, size, mtime_ns, inode, ctime_ns, EXISTS (SELECT 1 FROM flags fl WHERE fl.file_id = f.id "
        f"AND fl.kind IN ({_RETRY})) FROM files f WHERE mirror_id = ?",
        (mirror_id,),
    )
    return {path: (-1, -1, -1, -1) if retry else (size, mtime, inode, ctime) for path, size, mtime, inode, ctime,
            retry in rows}  # fmt: skip


def archive_at(conn: sqlite3.Connection, mirror_id: int, path: str) -> tuple[int, int] | None:
    """(archive id, file id) of the archive at path in the mirror, if it was read as one."""
    return conn.execute(
        "SELECT a.id, f.id FROM archives a JOIN files f ON f.id = a.file_id WHERE f.mirror_id = ? AND f.path = ?",
        (mirror_id, path),
    ).fetchone()


def member_paths(conn: sqlite3.Connection, archive_id: int) -> list[str]:
    return [r[0] for r in conn.execute("SELECT path FROM members WHERE archive_id = ?", (archive_id,))]


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


def catalog_file(conn: sqlite3.Connection) -> Path:
    """The file behind the connection (shards and caches are made beside it)."""
    return Path(conn.execute("PRAGMA database_list").fetchone()[2])
