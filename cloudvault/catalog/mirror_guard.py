"""The one guard every writer calls before it writes: is this path inside a mirror this user has indexed?

vault never writes into a mirror: not the one an entry comes from, not any other the active catalog knows, and
not one another catalog of this user indexed (the per-user registry, catalog/mirror_registry.py, lists every
root any catalog indexed; a user switching catalogs with VAULT_CATALOG is still guarded). Each writer
(`extract -o`, `compare --out`, `repro --out`, a repro input's `to`, a recipe's `run.cwd`, `restore env
--prefix/--to`, the catalog file itself) calls `refuse_write_into_mirror(conn, path, what)` with the folder or
file it is about to write; `mirror_holding` is the same question as a pure function over a list of roots.
Paths are compared resolved (symlinks followed as far as they exist), so `mirror/../mirror/x`, a symlink into a
mirror, and a relative `.` standing inside one are all caught. Remote mirrors (ssh://, s3://) are never local
paths and are left out.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable

from cloudvault.errors import UsageError


class WriteIntoMirror(UsageError):
    """refusing to write {what} {path}: it is inside the mirror {root}; vault never writes into a mirror"""


def _resolved(path: str | os.PathLike) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _folders_of(path: str) -> set[tuple[int, int]] | None:
    """The identities (device, inode) of a resolved path and of each folder above it; None when it is not all
    there (or cannot be looked at)."""
    held = set()
    while True:
        try:
            found = os.stat(path)
        except OSError:
            return None
        held.add((found.st_dev, found.st_ino))
        parent = os.path.dirname(path)
        if parent == path:
            return held
        path = parent


def mirror_holding(path: str | os.PathLike, roots: Iterable[str]) -> str | None:
    """The root (as given) of the local mirror that path is inside or is, else None.

    The path is resolved once. Where it exists, a root holds it when the root, its links followed, is one of the
    folders the path resolves through, compared by identity (one stat a root: the registry may list hundreds); a
    root that is not there cannot hold a path that is. A path not there yet is compared as text with each root
    resolved."""
    target = _resolved(path)
    folders = _folders_of(target)
    for root in roots:
        if "://" in root and not root.startswith("file://"):
            continue
        local = root.removeprefix("file://")
        if folders is None:
            if _inside(target, _resolved(local)):
                return root
            continue
        try:
            found = os.stat(local)
        except OSError:
            continue
        if (found.st_dev, found.st_ino) in folders:
            return root
    return None


def known_roots(conn: sqlite3.Connection) -> list[str]:
    """Every mirror root the catalog holds."""
    return [row[0] for row in conn.execute("SELECT root FROM mirrors ORDER BY id")]


def guarded_roots(conn: sqlite3.Connection | None) -> list[str]:
    """Every root no writer may write into: the catalog's (conn None: no catalog) and the registry's."""
    from cloudvault.catalog.mirror_registry import registered_roots

    return list(dict.fromkeys([*(known_roots(conn) if conn is not None else []), *registered_roots()]))


def refuse_write_into_mirror(
    conn: sqlite3.Connection | None, path: str | os.PathLike, what: str, extra_roots: Iterable[str] = ()
) -> None:
    """WriteIntoMirror (exit 2) when path is inside a mirror the catalog knows, one any catalog of this user
    indexed (the registry), or one of extra_roots (a mirror about to be indexed); call it before anything is
    created, parents included."""
    roots = [*guarded_roots(conn), *extra_roots]
    root = mirror_holding(path, roots)
    if root is not None:
        raise WriteIntoMirror(what=what, path=os.fspath(path), root=root)


def refuse_catalog_inside_mirror(catalog: str | os.PathLike, roots: Iterable[str]) -> None:
    """WriteIntoMirror when the catalog file is inside a mirror about to be indexed (roots), one it already
    knows or one the registry holds. Read without creating anything (immutable: no -wal, -shm or lock file
    appears), before the lock."""
    from cloudvault.catalog.db import _connect

    known: list[str] = []
    if os.path.isfile(catalog):
        conn = _connect(os.fspath(catalog), readonly=True, immutable=True)
        try:
            known = known_roots(conn)
        except sqlite3.DatabaseError:
            known = []  # not a catalog, or damaged: opening it says so, in one line
        finally:
            conn.close()
    refuse_write_into_mirror(None, catalog, "the catalog", [*roots, *known])
