"""Which mirror roots `vault index` reads: given paths or URLs, a definition's roots, or the catalog's known ones."""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from cloudvault import errors
from cloudvault.catalog.mirror_guard import mirror_holding
from cloudvault.catalog.query import known_mirrors
from cloudvault.index.definition import MirrorDefinition, builtin_definition, guess_manifest, load_definition
from cloudvault.tools.mirrorfs import LocalMirror, is_url, open_mirror, require_mirror


class MirrorRootGone(errors.EnvironmentProblem):
    """mirror root {root} is missing (unmounted?) but the catalog holds {known} files of it; nothing was changed. \
Mount it, or if it is gone for good drop it: `vault index --prune {quoted}` (or `vault mirrors rm {name}`)"""

    @classmethod
    def naming(cls, root: str, name: str, known: int) -> MirrorRootGone:
        import shlex

        return cls(root=root, quoted=shlex.quote(root), name=shlex.quote(name), known=known)


class MirrorShrank(errors.EnvironmentProblem):
    """mirror root {root} now has {now} of the {before} files indexed last time (emptied or half-mounted?); \
nothing was changed. Pass --prune if they really are gone"""


class InsideKnownMirror(errors.UsageError):
    """{path} is inside the mirror {name} ({root}) that the catalog already knows; nothing was indexed. \
Re-index that mirror instead: vault index {root}"""


class HoldsKnownMirror(errors.UsageError):
    """{path} holds the mirror {name} ({root}) that the catalog already knows; nothing was indexed. \
Re-index that mirror (vault index {root}), or index {path} into another catalog (--catalog FILE)"""


@dataclass(frozen=True)
class MirrorRoot:
    mirror: LocalMirror  # or FsspecMirror: the same methods
    definition: MirrorDefinition


def resolve_root(
    path: str, definition: MirrorDefinition | None, known: dict[str, tuple[str, str | None]] | None = None
) -> MirrorRoot:
    """A local path (made absolute) or an fsspec URL, with its definition. A mirror's identity is its root: a root
    the catalog already knows (known: root -> (name, manifest)) keeps the name it was indexed under; a new one is
    named after its directory (or its definition), with a suffix when another root holds that name, so
    /a/Marvell_cloud and a copy at /b/Marvell_cloud are two mirrors, never one taken for the other emptied."""
    if is_url(path) and urlsplit(path).password is not None:  # the catalog keeps the root: never a credential
        raise errors.UsageError(detail="a mirror URL must not hold a password; use ssh keys or the storage's own login")
    mirror = open_mirror(path if is_url(path) else _local_root(path))
    known = known or {}
    if mirror.root not in known:  # a known root that vanished is refused later, naming what it would lose
        require_mirror(mirror)
        _refuse_overlap(mirror.root, known)
    taken = {n for r, (n, _) in known.items() if r != mirror.root}
    if definition is None and mirror.root in known:
        name, manifest = known[mirror.root]
        definition = _definition_named(name, mirror.root, manifest)
    elif definition is None:
        name = unique_name(mirror.root.rstrip("/").rsplit("/", 1)[-1] or "mirror", taken)
        definition = MirrorDefinition(name=name, roots=(mirror.root,), manifest=guess_manifest(mirror.top_dirs()))
    else:
        name = known[mirror.root][0] if mirror.root in known else unique_name(definition.name, taken)
        definition = dataclasses.replace(definition, name=name)
    return MirrorRoot(mirror, definition)


def _local_root(path: str) -> str:
    """A local root made absolute, its links followed; a loop of links is NotFound, naming it."""
    try:
        return str(Path(path).expanduser().resolve())
    except (RuntimeError, OSError):  # a loop: RuntimeError up to Python 3.12, OSError (ELOOP) after
        why = "is a loop of symlinks: give the folder they should lead to"
        raise errors.NotFound(detail=f"mirror {path!r} {why}") from None


def _refuse_overlap(root: str, known: dict[str, tuple[str, str | None]]) -> None:
    """A new root inside a known mirror, or holding one, would catalog the same files twice under two mirrors
    (and make a bogus entry of a subfolder's name): refused, naming the known mirror to re-index instead."""
    if is_url(root):
        return
    if (inside := mirror_holding(root, known)) is not None:
        raise InsideKnownMirror(path=root, name=known[inside][0], root=inside)
    for other, (name, _) in known.items():
        if not is_url(other) and mirror_holding(other, [root]) is not None:
            raise HoldsKnownMirror(path=root, name=name, root=other)


def unique_name(base: str, taken: set[str]) -> str:
    """base, or base-2, base-3 ... : the first no other root holds."""
    return next(c for c in (base, *(f"{base}-{i}" for i in range(2, 10_000))) if c not in taken)


def _definition_named(name: str, root: str, manifest: str | None) -> MirrorDefinition:
    """The built-in definition of that name (or of the name it was suffixed from, `marvell_cloud-2`) if there is
    one (its entry pattern and secret rules), under this name; else a plain one."""
    for builtin in dict.fromkeys([name, re.sub(r"-\d+$", "", name)]):
        try:
            return dataclasses.replace(builtin_definition(builtin).with_root(root), name=name)
        except FileNotFoundError:
            continue
    return MirrorDefinition(name=name, roots=(root,), manifest=manifest)


def _builtin(name: str) -> MirrorDefinition:
    """The built-in definition of that name; an unknown name (a typo) is exit 3 listing the known ones."""
    from importlib import resources

    try:
        return builtin_definition(name)
    except FileNotFoundError:
        names = sorted(p.name[:-5] for p in resources.files("cloudvault.mirrors").iterdir() if p.name.endswith(".toml"))
        raise errors.NotFound(detail=f"no built-in mirror definition {name!r}; known: {', '.join(names)} "
                              "(or give a definition's .toml path)") from None  # fmt: skip


def roots_to_index(conn: sqlite3.Connection, paths: list[str], definition: str | None) -> list[MirrorRoot]:
    """The roots to index: paths given, else the definition's, else every mirror the catalog knows."""
    mdef = None
    if definition:
        mdef = load_definition(Path(definition)) if definition.endswith(".toml") else _builtin(definition)
        paths = paths or list(mdef.roots)
    known = known_mirrors(conn)
    if not paths:
        paths = list(known)
    if not paths:
        raise errors.UsageError(detail="give a mirror path to index (e.g. `vault index /path/to/Marvell_cloud`)")
    chosen: dict[str, MirrorRoot] = {}
    for path in paths:  # every root named before any is walked: two new roots of one name get two names
        mroot = resolve_root(path, mdef, known)
        if mroot.mirror.root not in chosen:  # a root given twice is indexed once
            chosen[mroot.mirror.root] = mroot
            known = {**known, mroot.mirror.root: (mroot.definition.name, mroot.definition.manifest)}
    return list(chosen.values())
