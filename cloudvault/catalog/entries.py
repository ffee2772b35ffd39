"""The entries table: an entry's manifest metadata, rewritten only where it changed."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from cloudvault.models import Entry


def upsert_entries(conn: sqlite3.Connection, mirror_id: int, entries: Iterable[tuple[Entry, bool]]) -> None:
    """Entries with their manifest metadata; only rows whose values changed are rewritten (FTS stays small)."""
    for entry, present in entries:
        values = (
            entry.what,
            entry.node_gpu,
            entry.measured,
            entry.size_text,
            "; ".join(entry.key_files),
            entry.caution,
            entry.settings_json,
            int(present),
        )
        row = conn.execute(
            "SELECT what, node_gpu, measured, size_text, key_files, caution, settings, present FROM entries "
            "WHERE mirror_id = ? AND entry_id = ?",
            (mirror_id, entry.entry_id),
        ).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO entries(mirror_id, entry_id, what, node_gpu, measured, size_text, key_files, caution,"
                " settings, present) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (mirror_id, entry.entry_id, *values),
            )
        elif tuple(row) != values:
            conn.execute(
                "UPDATE entries SET what=?, node_gpu=?, measured=?, size_text=?, key_files=?, caution=?, settings=?,"
                " present=? WHERE mirror_id = ? AND entry_id = ?",
                (*values, mirror_id, entry.entry_id),
            )
