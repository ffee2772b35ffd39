"""What a catalog holds, in counts per mirror, and when each mirror was last indexed: `vault info`."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass

from cloudvault.catalog.db import meta_value, schema_version

MIRRORS = """
SELECT m.name, m.root, m.indexed_at,
       (SELECT count(*) FROM entries e WHERE e.mirror_id = m.id AND e.entry_id != '' AND e.present = 1) AS entries,
       (SELECT count(*) FROM files f WHERE f.mirror_id = m.id) AS files,
       (SELECT count(*) FROM archives a JOIN files f ON f.id = a.file_id WHERE f.mirror_id = m.id) AS archives,
       (SELECT coalesce(sum(a.member_count), 0) FROM archives a JOIN files f ON f.id = a.file_id
         WHERE f.mirror_id = m.id) AS members,
       (SELECT count(*) FROM flags g WHERE g.mirror_id = m.id) AS flags
FROM mirrors m ORDER BY m.id
"""


@dataclass(frozen=True)
class MirrorSummary:
    """One mirror of the catalog: its name and root, when it was last indexed, and what it holds."""

    name: str
    root: str
    indexed_at: str | None
    entries: int
    files: int
    archives: int
    members: int
    flags: int


@dataclass(frozen=True)
class CatalogSummary:
    """A catalog's schema, the vault that last wrote it, its mirrors, and the restores and runs it records."""

    schema_version: int
    tool_version: str | None
    built_by_demo: bool
    mirrors: tuple[MirrorSummary, ...]
    restores: int
    runs: int
    seekable_copies: int

    @property
    def last_index(self) -> str | None:
        return max((m.indexed_at for m in self.mirrors if m.indexed_at), default=None)

    def to_json(self) -> dict:
        doc = asdict(self)
        doc["mirrors"] = [asdict(m) for m in self.mirrors]
        doc["last_index"] = self.last_index
        return doc


def catalog_summary(conn: sqlite3.Connection) -> CatalogSummary:
    """The summary of the catalog conn reads (its rows read by column name)."""
    rows = conn.execute(MIRRORS)
    columns = [c[0] for c in rows.description]
    mirrors = tuple(MirrorSummary(**dict(zip(columns, row, strict=True))) for row in rows)

    def count(table: str) -> int:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]

    return CatalogSummary(
        schema_version=schema_version(conn),
        tool_version=meta_value(conn, "tool_version"),
        built_by_demo=meta_value(conn, "demo") == "1",
        mirrors=mirrors,
        restores=count("restores"),
        runs=count("runs"),
        seekable_copies=count("seekable"),
    )


@dataclass(frozen=True, slots=True)
class CatalogInfo:
    """`vault info`: which catalog answers (its path, what named it: --catalog, $VAULT_CATALOG, default, demo) and
    what it holds (None: no catalog there yet)."""

    path: str
    named_by: str
    summary: CatalogSummary | None

    def to_json(self) -> dict:
        catalog = {"path": self.path, "named_by": self.named_by, "exists": self.summary is not None}
        return {"catalog": catalog, **(self.summary.to_json() if self.summary else {"mirrors": []})}


def catalog_info(conn: sqlite3.Connection | None, path: str, named_by: str) -> CatalogInfo:
    """The catalog at path, as conn reads it (None: there is none there yet)."""
    return CatalogInfo(path, named_by, catalog_summary(conn) if conn is not None else None)
