"""Which mirror roots `vault index` reads: given paths or URLs, a definition's roots, or the catalog's known ones."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from cloudvault import errors
from cloudvault.catalog.query import known_mirrors
from cloudvault.index.definition import MirrorDefinition, builtin_definition, guess_manifest, load_definition
from cloudvault.mirrorfs import LocalMirror, is_url, open_mirror, require_mirror


class MirrorRootGone(errors.EnvironmentProblem):
    """mirror root {root} is missing (unmounted?) but the catalog holds {known} files of it; nothing was changed. \
Mount it, or pass --prune to drop them"""


class MirrorShrank(errors.EnvironmentProblem):
    """mirror root {root} now has {now} of the {before} files indexed last time (emptied or half-mounted?); \
nothing was changed. Pass --prune if they really are gone"""


@dataclass(frozen=True)
class MirrorRoot:
    mirror: LocalMirror  # or FsspecMirror: the same methods
    definition: MirrorDefinition


def resolve_root(
    path: str, definition: MirrorDefinition | None, known: dict[str, tuple[str, str | None]] | None = None
) -> MirrorRoot:
    """A local path (made absolute) or an fsspec URL, with its definition. A plain path that the catalog already
    knows (known: root -> (name, manifest)) keeps the name it was indexed under; a new one is named after its
    directory, with a suffix when that name is taken by another root."""
    if is_url(path) and urlsplit(path).password is not None:  # the catalog keeps the root: never a credential
        raise errors.UsageError(detail="a mirror URL must not hold a password; use ssh keys or the storage's own login")
    mirror = open_mirror(path if is_url(path) else str(Path(path).expanduser().resolve()))
    known = known or {}
    if mirror.root not in known:  # a known root that vanished is refused later, naming what it would lose
        require_mirror(mirror)
    if definition is None and mirror.root in known:
        name, manifest = known[mirror.root]
        definition = _definition_named(name, mirror.root, manifest)
    elif definition is None:
        base = mirror.root.rstrip("/").rsplit("/", 1)[-1] or "mirror"
        taken = {n for n, _ in known.values()}
        name = next(c for c in (base, *(f"{base}-{i}" for i in range(2, 1000))) if c not in taken)
        definition = MirrorDefinition(name=name, roots=(mirror.root,), manifest=guess_manifest(mirror.top_dirs()))
    return MirrorRoot(mirror, definition)


def _definition_named(name: str, root: str, manifest: str | None) -> MirrorDefinition:
    """The built-in definition of that name if there is one (its entry pattern and secret rules), else a plain one."""
    try:
        return builtin_definition(name).with_root(root)
    except FileNotFoundError:
        return MirrorDefinition(name=name, roots=(root,), manifest=manifest)


def roots_to_index(conn: sqlite3.Connection, paths: list[str], definition: str | None) -> list[MirrorRoot]:
    """The roots to index: paths given, else the definition's, else every mirror the catalog knows."""
    mdef = None
    if definition:
        mdef = load_definition(Path(definition)) if definition.endswith(".toml") else builtin_definition(definition)
        paths = paths or list(mdef.roots)
    known = known_mirrors(conn)
    if not paths:
        paths = list(known)
    if not paths:
        raise errors.UsageError(detail="give a mirror path to index (e.g. `vault index /path/to/Marvell_cloud`)")
    return [resolve_root(p, mdef, known) for p in paths]
