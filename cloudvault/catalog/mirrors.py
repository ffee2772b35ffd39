"""The mirrors table: one row per mirror a catalog indexes (its name, root, manifest, when it was indexed)."""

from __future__ import annotations

import sqlite3
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
