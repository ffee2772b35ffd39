"""The per-user registry of every mirror root any catalog of this user has indexed, read by the mirror guard.

A catalog knows only its own mirrors, and a user may have several (their own, the demo's through VAULT_CATALOG,
one per project): a write must be refused inside any of their mirrors, whichever catalog is active. `vault index`
records each root it indexes here (root, display name, catalog file, when) before the catalog's row is written,
so a crash leaves a root guarded rather than unguarded; `vault index --prune` and `vault mirrors rm` forget one.
The file is JSON in the XDG state dir ($XDG_STATE_HOME/cloudvault/mirrors.json), changed only under its lock
file, written whole to a temp name, fsynced and renamed into place.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import NamedTuple

from cloudvault import config, errors

FORMAT = 1


class RegistryDamaged(errors.EnvironmentProblem):
    """mirror registry {path} cannot be read ({detail}); vault writes nothing while it cannot tell where the \
mirrors are: move that file away, then index each mirror again (vault index ROOT)"""


class Registered(NamedTuple):
    root: str
    name: str
    catalog: str  # the catalog file that indexed it (realpath)
    indexed_at: str


def registered() -> list[Registered]:
    """Every recorded mirror root, in the order they were first recorded; none when there is no registry yet."""
    path = config.mirror_registry_path()
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryDamaged(path=path, detail=getattr(exc, "strerror", None) or str(exc)) from None
    import json

    try:
        rows = json.loads(text)["mirrors"]
        return [Registered(*(str(row[field]) for field in Registered._fields)) for row in rows]
    except (ValueError, KeyError, TypeError) as exc:
        raise RegistryDamaged(path=path, detail=f"not a registry: {type(exc).__name__} {exc}") from None


def registered_roots() -> list[str]:
    return list(dict.fromkeys(row.root for row in registered()))


def catalog_key(catalog: str | os.PathLike) -> str:
    """How a catalog file is named in the registry: its resolved path."""
    return os.path.realpath(os.fspath(catalog))


def record(catalog: str | os.PathLike, mirrors: Iterable[tuple[str, str]]) -> None:
    """Each (root, display name) as indexed into catalog now; a root already recorded for it is brought up to date."""
    key, now = catalog_key(catalog), datetime.now(UTC).isoformat(timespec="seconds")

    def add(rows: list[Registered]) -> list[Registered]:
        by_root = {(row.root, row.catalog): row for row in rows}
        for root, name in mirrors:
            by_root[(root, key)] = Registered(root, name, key, now)
        return list(by_root.values())

    _change(add)


def forget(records: Iterable[tuple[str, str]]) -> None:
    """Those (root, catalog) records gone: a mirror removed from its catalog, or one whose catalog is gone."""
    gone = {(root, catalog_key(catalog)) for root, catalog in records}
    _change(lambda current: [row for row in current if (row.root, row.catalog) not in gone])


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


def _change(edit: Callable[[list[Registered]], list[Registered]]) -> None:
    """Read, edit and rewrite the registry under its lock; unchanged, it is not rewritten."""
    import json

    from cloudvault.atomic import write_text

    path = config.mirror_registry_path()
    with _locked(path):
        rows = registered()
        changed = edit(rows)
        if changed != rows:
            doc = {"format": FORMAT, "mirrors": [row._asdict() for row in changed]}
            write_text(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n", mode=0o600)


@contextmanager
def _locked(path: str) -> Iterator[None]:
    """The registry's writers one at a time (two `vault index` runs on two catalogs), through a lock file beside it."""
    import fcntl

    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path + ".lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
