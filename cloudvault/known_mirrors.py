"""`vault mirrors`: the mirrors this user's catalogs know (the active catalog's, then the per-user registry's), and
the removal of one from the active catalog, as frozen typed results whose to_json() is the command's --json."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from cloudvault.catalog.mirrors import Holdings, KnownMirror
from cloudvault.documents import SHOWN_ONLY


@dataclass(frozen=True)
class KnownMirrors:
    """Every mirror known: the active catalog's first, then the registry's (each a KnownMirror)."""

    mirrors: tuple[KnownMirror, ...]

    def to_json(self) -> list:
        return [k.to_json() for k in self.mirrors]


@dataclass(frozen=True)
class MirrorRemoved:
    """`vault mirrors rm NAME`: the mirror removed, and what its catalog lost (None: only the registry held it,
    its records forgotten)."""

    mirror: KnownMirror
    lost: Holdings | None
    active: str = field(default="", metadata=SHOWN_ONLY)  # the active catalog's path

    def to_json(self) -> dict:
        m, lost = self.mirror, self.lost
        return {"removed": m.name, "root": m.root, "catalog": m.catalog,
                "lost": None if lost is None else lost.__dict__, "registry_only": lost is None}  # fmt: skip


def known_mirrors(catalog: str | None) -> KnownMirrors:
    """The mirrors the catalog (it may not exist yet) and the registry know."""
    from cloudvault import config
    from cloudvault.catalog.db import catalog_opened
    from cloudvault.catalog.mirrors import known_everywhere

    path = config.catalog_path(catalog)
    with catalog_opened(path, readonly=True, optional=True) as conn:
        return KnownMirrors(tuple(known_everywhere(conn, path)))


def remove_mirror(catalog: str | None, name: str, confirm: Callable[[list[KnownMirror], str], None]) -> MirrorRemoved:
    """Under the catalog's writer lock (no index runs meanwhile): the mirror NAME found, confirm(targets, catalog)
    asked (it raises to refuse), then removed."""
    from cloudvault import config
    from cloudvault.catalog.db import catalog_opened, writer_lock
    from cloudvault.catalog.mirrors import known_everywhere, mirrors_named, remove_known

    path = config.catalog_path(catalog)
    lock = writer_lock(path) if os.path.isfile(path) else contextlib.nullcontext()
    with lock, catalog_opened(path, readonly=False, optional=True) as conn:
        targets = mirrors_named(known_everywhere(conn, path), name, path)
        confirm(targets, path)
        lost = remove_known(conn, targets)
    return MirrorRemoved(targets[0], lost, path)
