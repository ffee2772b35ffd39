"""`vault ls`: the files of one entry and the members of its archives, matching a glob; a frozen result.

A namedtuple, not a dataclass: ls must start fast."""

from __future__ import annotations

import sqlite3
from collections import namedtuple

from cloudvault.catalog import query  # query.resolve_entry looked up at the call
from cloudvault.catalog.details import list_entry


class Listing(namedtuple("Listing", "entry pattern hits")):
    """The entry's ID, the glob asked (None: everything) and what matched (catalog.query.Hit: files, then members)."""

    __slots__ = ()

    def to_json(self) -> dict:
        return {"entry": self.entry, "pattern": self.pattern, "results": [h.to_json() for h in self.hits]}


def list_files(conn: sqlite3.Connection, entry: str, pattern: str | None = None) -> Listing:
    """The entry (ID or unique prefix) resolved, and its files and members matching pattern."""
    mirror_id, entry_id, _ = query.resolve_entry(conn, entry)
    return Listing(entry_id, pattern, tuple(list_entry(conn, mirror_id, entry_id, pattern)))
