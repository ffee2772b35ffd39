"""Where envs go, every target checked before the first write: the one place that says which folders a restore or
a move may create, fill and (with --force) replace.

An env lands at one folder, its target, and --force swaps the target out; so a target is never `/`, never inside a
mirror, never a mirror or a folder holding one, never a folder holding other envs (replacing it would remove them),
and under --to ROOT never outside ROOT (ROOT itself only for the conda root of a tree, placed there, never swapped
in over it). A move's target and its source never overlap. An env that cannot be placed safely (a name that is not
a folder name, a folder that climbs out, a name two envs share) is refused when it is asked for, naming why.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from cloudvault import errors
from cloudvault.catalog.mirror_guard import guarded_roots, mirror_holding, refuse_write_into_mirror
from cloudvault.restore.env.source import EnvSource

NESTED_DEPTH = 3  # how deep under a target --force looks for other envs (ROOT/envs/NAME/conda-meta)


class UnsafeEnv(errors.IntegrityError):
    """env {name!r} of {where} cannot be restored: {why}; nothing was restored"""


class SharedEnvName(errors.Ambiguous):
    """{why}; name one as ARCHIVE:FOLDER; nothing was restored"""


class TargetRefused(errors.UsageError):
    """refusing to place {name} at {path}: {why}; nothing was written"""


def target_for(env: EnvSource, prefix: str | None, to: str | None) -> Path:
    """Where env goes: --prefix, ROOT/<its folder> for --to, else its original prefix."""
    if prefix:
        return Path(os.path.abspath(os.path.expanduser(prefix)))
    if to:
        root = Path(os.path.abspath(os.path.expanduser(to)))
        return root / env.folder if env.folder else (root if env.nested else root / env.name)
    if env.prefix is None:
        raise errors.UsageError(detail=f"the recipe records no prefix for {env.name}; give --prefix or --to")
    return Path(env.prefix)


def placements(conn: sqlite3.Connection, envs: list[EnvSource], prefix: str | None, to: str | None,
               force: bool, move_from: Path | None = None) -> list[tuple[Path, EnvSource]]:  # fmt: skip
    """(target, env) for every env, shallowest first (a conda root before the envs inside it), once every env
    and every target (and the source of a move, move_from) has passed its checks: nothing is written before all
    of them have."""
    for env in envs:
        refuse_unsafe(env)
    root = Path(os.path.abspath(os.path.expanduser(to))) if to else None
    placed = sorted(((target_for(env, prefix, to), env) for env in envs), key=lambda t: len(t[0].parts))
    if move_from is not None:
        check_move(conn, placed[0][1].name, move_from, placed[0][0])
    going: dict[str, EnvSource] = {}
    for target, env in placed:
        other = going.setdefault(os.path.realpath(target), env)
        if other is not env:  # one would replace the other (--force) or be refused half-way
            raise TargetRefused(name=env.where, path=target, why=f"{other.where} of this command goes there too")
        check_target(conn, env.name, target, force, root, conda_root=bool(env.nested))
    return placed


def refuse_unsafe(env: EnvSource) -> None:
    """UnsafeEnv (exit 5) for an env discover() found a problem with; SharedEnvName (exit 4) for one asked for by
    a name other envs share."""
    if env.problem is not None:
        raise UnsafeEnv(name=env.name, where=env.where, why=env.problem)
    if env.shared is not None:
        raise SharedEnvName(why=env.shared)


def check_target(conn: sqlite3.Connection, name: str, target: Path, force: bool, root: Path | None = None,
                 conda_root: bool = False) -> None:  # fmt: skip
    """TargetRefused (exit 2) or WriteIntoMirror (exit 2) unless target is a folder an env may be placed at (and,
    with force, swapped out); root: --to ROOT; conda_root: the env is a conda root, which belongs at ROOT itself."""
    resolved = Path(os.path.realpath(target))
    if resolved.parent == resolved:
        raise TargetRefused(name=name, path=target, why="it is the file system's root")
    if root is not None:
        _check_under_root(name, target, resolved, root, conda_root)
        if force and os.path.lexists(target) and resolved == Path(os.path.realpath(root)):
            raise TargetRefused(name=name, path=target, why="--force would replace ROOT itself, every env under it "
                                "with it; remove it yourself or restore this env with --prefix")  # fmt: skip
    refuse_write_into_mirror(conn, target, f"env {name} at")
    local = [r.removeprefix("file://") for r in guarded_roots(conn) if "://" not in r.removeprefix("file://")]
    held = [root for root in local if mirror_holding(root, [os.fspath(resolved)])]
    if held:
        raise TargetRefused(name=name, path=target, why=f"it holds the mirror {held[0]}")
    if force and os.path.isdir(target) and not os.path.islink(target):
        other = env_inside(target)
        if other is not None:
            raise TargetRefused(name=name, path=target, why=f"it holds another env, {other}, that --force would remove")


def _check_under_root(name: str, target: Path, resolved: Path, root: Path, conda_root: bool) -> None:
    base = Path(os.path.realpath(root))
    if resolved == base and conda_root:
        return
    if not resolved.is_relative_to(base) or resolved == base:
        raise TargetRefused(name=name, path=target, why=f"it is not a folder inside --to {root}")


def env_inside(folder: Path, depth: int = NESTED_DEPTH) -> str | None:
    """The first folder below folder (not folder itself, at most depth down) that is an env (conda-meta/ or
    pyvenv.cfg), else None. Links are not followed."""
    stack = [(os.fspath(folder), 0)]
    while stack:
        path, level = stack.pop()
        try:
            with os.scandir(path) as found:
                entries = list(found)
        except OSError:
            continue
        names = {e.name for e in entries}
        if level and ("conda-meta" in names or "pyvenv.cfg" in names):
            return path
        if level < depth:
            stack.extend((e.path, level + 1) for e in entries if e.is_dir(follow_symlinks=False))
    return None


def check_move(conn: sqlite3.Connection, name: str, source: Path, target: Path) -> None:
    """TargetRefused (exit 2) when a move's target and source overlap (copying a tree into itself, or replacing
    the folder that holds the source); WriteIntoMirror when the source, which a move removes, is in a mirror."""
    src, dst = Path(os.path.realpath(source)), Path(os.path.realpath(target))
    if dst != src and dst.is_relative_to(src):
        raise TargetRefused(name=name, path=target, why=f"it is inside {source}, the env being moved")
    if dst != src and src.is_relative_to(dst):
        raise TargetRefused(name=name, path=target, why=f"the env being moved, {source}, is inside it")
    refuse_write_into_mirror(conn, source, f"(a move removes its source) env {name} at")
