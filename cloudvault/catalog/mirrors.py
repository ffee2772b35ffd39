"""The mirrors table: one row per mirror a catalog indexes (its name, root, manifest, when it was indexed), what
each holds, and removing one with everything it holds (in one transaction)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime


def upsert_mirror(conn: sqlite3.Connection, name: str, root: str, manifest: str | None) -> int:
    conn.execute(
        "INSERT INTO mirrors(name, root, manifest) VALUES (?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET root = excluded.root, manifest = excluded.manifest",
        (name, root, manifest),
    )
    return conn.execute("SELECT id FROM mirrors WHERE name = ?", (name,)).fetchone()[0]


def mark_indexed(conn: sqlite3.Connection, mirror_id: int) -> None:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    conn.execute("UPDATE mirrors SET indexed_at = ? WHERE id = ?", (now, mirror_id))


def mirror_named(conn: sqlite3.Connection, name: str) -> int | None:
    row = conn.execute("SELECT id FROM mirrors WHERE name = ?", (name,)).fetchone()
    return row[0] if row else None


@dataclass(frozen=True)
class Holdings:
    """What a mirror's rows hold in a catalog: what removing it loses (runs and restores keep their record)."""

    entries: int
    files: int
    archives: int
    members: int
    flags: int
    copies: int  # seekable copies vault made of its archives (files in the cache, removed with it)
    runs: int
    restores: int

    def lost(self) -> str:
        """'12 entries, 340 files, 3 archives, 5120 members, 2 flags, 1 seekable copy' (runs and restores
        recorded against it are kept, without their mirror)."""
        parts = [(self.entries, "entry", "entries"), (self.files, "file", "files"),
                 (self.archives, "archive", "archives"), (self.members, "member", "members"),
                 (self.flags, "flag", "flags"), (self.copies, "seekable copy", "seekable copies")]  # fmt: skip
        return ", ".join(f"{n} {one if n == 1 else many}" for n, one, many in parts)


_HOLDINGS = """
SELECT
  (SELECT count(*) FROM entries WHERE mirror_id = :id AND entry_id != '') AS entries,
  (SELECT count(*) FROM files WHERE mirror_id = :id) AS files,
  (SELECT count(*) FROM archives a JOIN files f ON f.id = a.file_id WHERE f.mirror_id = :id) AS archives,
  (SELECT coalesce(sum(a.member_count), 0) FROM archives a JOIN files f ON f.id = a.file_id
    WHERE f.mirror_id = :id) AS members,
  (SELECT count(*) FROM flags WHERE mirror_id = :id) AS flags,
  (SELECT count(*) FROM seekable s JOIN archives a ON a.id = s.archive_id JOIN files f ON f.id = a.file_id
    WHERE f.mirror_id = :id) AS copies,
  (SELECT count(*) FROM runs WHERE mirror_id = :id) AS runs,
  (SELECT count(*) FROM restores WHERE mirror_id = :id) AS restores
"""


def holdings(conn: sqlite3.Connection, mirror_id: int) -> Holdings:
    cur = conn.cursor()
    cur.row_factory = sqlite3.Row
    row = cur.execute(_HOLDINGS, {"id": mirror_id}).fetchone()
    return Holdings(**{name: row[name] for name in row.keys()})


@dataclass(frozen=True)
class MirrorRow:
    id: int
    name: str
    root: str
    indexed_at: str | None


def mirror_rows(conn: sqlite3.Connection) -> list[MirrorRow]:
    """Every mirror of the catalog, in the order they were added."""
    cur = conn.cursor()
    cur.row_factory = sqlite3.Row
    rows = cur.execute("SELECT id, name, root, indexed_at FROM mirrors ORDER BY id")
    return [MirrorRow(row["id"], row["name"], row["root"], row["indexed_at"]) for row in rows]


def remove_mirror(conn: sqlite3.Connection, mirror: MirrorRow) -> Holdings:
    """The mirror's rows gone in one transaction (entries, files, archives, members, flags and seekable-copy rows
    by cascade; runs and restores keep their record without it), then the copies vault made of its archives and
    its record in the per-user registry. Returns what was lost."""
    from cloudvault.catalog import mirror_registry
    from cloudvault.catalog.copies import copy_recorded
    from cloudvault.catalog.db import catalog_file, transaction

    with transaction(conn):
        lost = holdings(conn, mirror.id)
        copies = [row[0] for row in conn.execute(
            "SELECT s.path FROM seekable s JOIN archives a ON a.id = s.archive_id JOIN files f ON f.id = a.file_id "
            "WHERE f.mirror_id = ?", (mirror.id,))]  # fmt: skip
        conn.execute("DELETE FROM mirrors WHERE id = ?", (mirror.id,))
    for path in copies:  # vault's own files in the cache: nothing names them now
        if not copy_recorded(conn, path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    mirror_registry.forget_root(catalog_file(conn), mirror.root)
    return lost

