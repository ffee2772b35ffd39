"""`vault search`: the catalog searched by keyword, or every flag the index left; frozen results, their --json.

Namedtuples, not dataclasses: the search process must start fast."""

from __future__ import annotations

import sqlite3

from cloudvault.catalog import query
from cloudvault.catalog.flagged import all_flags, searched_documents
from cloudvault.catalog.query import KINDS, search
from cloudvault.record import record

# What `vault search` is asked: every term must match; only this entry (ID prefix) or any; these kinds; at most
# limit hits per kind (0: all).
SearchRequest = record("SearchRequest", "terms entry kinds limit")


class Searched(record("Searched", "query hits totals cautions documents")):
    """Hits by kind (catalog.query.Hit), each kind's total, the cautions of the entries hit, and how many
    documents' text was searched (the rest is known by name)."""

    __slots__ = ()

    @property
    def found(self) -> bool:
        return any(self.hits.values())

    def to_json(self) -> dict:
        return {"query": list(self.query), "totals": dict(self.totals), "cautions": dict(self.cautions),
                "results": [h.to_json() for kind in KINDS for h in self.hits.get(kind, ())]}  # fmt: skip


class Flags(record("Flags", "flags")):
    """Every flag of the catalog, or of one kind (catalog.flagged.Flag)."""

    __slots__ = ()

    def to_json(self) -> dict:
        return {"flags": [f._asdict() for f in self.flags]}


def search_catalog(conn: sqlite3.Connection, request: SearchRequest) -> Searched:
    """Entries, docs, files, members, restores and runs whose text holds every term."""
    scope = query.resolve_entry(conn, request.entry)[:2] if request.entry else None
    found = search(conn, list(request.terms), scope=scope, kinds=tuple(request.kinds) or KINDS, limit=request.limit)
    hits = {kind: tuple(hits) for kind, hits in found.hits.items()}
    return Searched(tuple(found.query), hits, dict(found.totals), dict(found.cautions),
                    searched_documents(conn, scope))  # fmt: skip


def flags(conn: sqlite3.Connection, kind: str | None = None) -> Flags:
    """Every flag the index left (secret, damage ...), of one kind or all."""
    return Flags(tuple(all_flags(conn, kind)))
