"""One entry as `vault ls` and `vault show` see it: its files and members matching a glob, or its details; frozen
results. Namedtuples, not dataclasses: ls and show must start fast."""

from __future__ import annotations

import sqlite3

from cloudvault.catalog import query  # query.resolve_entry looked up at the call
from cloudvault.catalog.details import EntryDetails, entry_details, list_entry
from cloudvault.record import record


class Listing(record("Listing", "entry pattern hits")):
    """The entry's ID, the glob asked (None: everything) and what matched (catalog.query.Hit: files, then members)."""

    __slots__ = ()

    def to_json(self) -> dict:
        return {"entry": self.entry, "pattern": self.pattern, "results": [h.to_json() for h in self.hits]}


def list_files(conn: sqlite3.Connection, entry: str, pattern: str | None = None) -> Listing:
    """The entry (ID or unique prefix) resolved, and its files and members matching pattern."""
    mirror_id, entry_id, _ = query.resolve_entry(conn, entry)
    return Listing(entry_id, pattern, tuple(list_entry(conn, mirror_id, entry_id, pattern)))


def describe_entry(conn: sqlite3.Connection, entry: str) -> EntryDetails:
    """The entry (ID or unique prefix) resolved, and what the manifest, the index and vault's records say of it."""
    return entry_details(conn, *query.resolve_entry(conn, entry)[:2])
