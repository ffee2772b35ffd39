"""The mirrors table: one row per mirror a catalog indexes (its name, root, manifest, when it was indexed), what
each holds, and removing one with everything it holds (in one transaction)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime

from cloudvault import errors


class MirrorUnknown(errors.NotFound):
    """no mirror {name!r} in catalog {catalog} or in the registry of indexed mirrors; known: {known}"""


class MirrorInAnotherCatalog(errors.UsageError):
    """mirror {name} ({root}) is in catalog {catalog}, not the active one; nothing was removed. Remove it \
there: vault --catalog {quoted} mirrors rm {quoted_name}"""


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
    return Holdings(**{name: row[name] for name in row.keys()})  # noqa: SIM118 (a Row iterates its values)


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
    mirror_registry.forget([(mirror.root, catalog_file(conn))])
    return lost


@dataclass(frozen=True)
class KnownMirror:
    """A mirror as `vault mirrors` shows it: from the active catalog (row and holdings set) or only from the
    per-user registry (another catalog's, or one whose catalog no longer holds it: counts unknown)."""

    name: str
    root: str
    catalog: str
    indexed_at: str | None
    present: bool | None  # None: a remote root (ssh://, s3://), not looked at
    row: MirrorRow | None = None
    holds: Holdings | None = None

    @property
    def in_active_catalog(self) -> bool:
        return self.row is not None

    def to_json(self) -> dict:
        """The one schema of `vault mirrors --json`; counts are None for a mirror only the registry knows."""
        held = {} if self.holds is None else self.holds.__dict__
        return {
            "name": self.name,
            "root": self.root,
            "catalog": self.catalog,
            "in_active_catalog": self.in_active_catalog,
            **{count: held.get(count) for count in ("entries", "files", "members")},
            "indexed_at": self.indexed_at,
            "present": self.present,
        }


def _present(root: str) -> bool | None:
    if "://" in root and not root.startswith("file://"):
        return None
    return os.path.isdir(root.removeprefix("file://"))


def known_everywhere(conn: sqlite3.Connection | None, catalog: str) -> list[KnownMirror]:
    """The active catalog's mirrors (conn None: it does not exist yet), then every other root the registry holds."""
    from cloudvault.catalog.mirror_registry import catalog_key, registered

    rows = mirror_rows(conn) if conn is not None else []
    found = [KnownMirror(row.name, row.root, catalog, row.indexed_at, _present(row.root), row, holdings(conn, row.id))
             for row in rows]  # fmt: skip
    ours = {(row.root, catalog_key(catalog)) for row in rows}
    found += [KnownMirror(rec.name, rec.root, rec.catalog, rec.indexed_at, _present(rec.root))
              for rec in registered() if (rec.root, rec.catalog) not in ours]  # fmt: skip
    return found


def mirrors_named(known: list[KnownMirror], name: str, catalog: str) -> list[KnownMirror]:
    """What `vault mirrors rm NAME` removes: the active catalog's mirror of that name (or root), else the
    registry's records of it whose catalog no longer holds it (forgotten together). One another catalog still
    holds is refused, naming that catalog."""
    root = os.path.realpath(name) if os.sep in name else None
    matches = [k for k in known if name in (k.name, k.root) or k.root == root]
    if active := [k for k in matches if k.in_active_catalog]:
        return active
    if not matches:
        names = ", ".join(dict.fromkeys(k.name for k in known)) or "none"
        raise MirrorUnknown(name=name, catalog=catalog, known=names)
    for k in matches:
        if still_held(k.root, k.catalog):
            import shlex

            raise MirrorInAnotherCatalog(name=k.name, root=k.root, catalog=k.catalog, quoted=shlex.quote(k.catalog),
                                         quoted_name=shlex.quote(k.name))  # fmt: skip
    return matches


def remove_known(conn: sqlite3.Connection | None, targets: list[KnownMirror]) -> Holdings | None:
    """What mirrors_named found, removed: the active catalog's mirror with its rows (what it lost), or the
    registry's stale records of it forgotten (None)."""
    if targets[0].row is not None:
        return remove_mirror(conn, targets[0].row)
    from cloudvault.catalog.mirror_registry import forget

    forget((k.root, k.catalog) for k in targets)
    return None


def still_held(root: str, catalog: str) -> bool:
    """Whether the record's catalog still exists and lists its root (read without creating anything there); a
    catalog that cannot be read counts as holding it, so it is never forgotten by mistake."""
    import sqlite3

    from cloudvault.catalog.db import _connect
    from cloudvault.catalog.mirror_guard import known_roots

    if not os.path.isfile(catalog):
        return False
    try:
        conn = _connect(catalog, readonly=True, immutable=True)
        try:
            return root in known_roots(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return True
