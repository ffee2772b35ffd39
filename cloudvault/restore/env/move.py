"""Move an env vault restored (its marker says from which prefix its files speak) to a new prefix: copied into a
staging folder beside the new target, relocated again, renamed into place, and only then the old one removed."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

from cloudvault import errors
from cloudvault.catalog.records import now
from cloudvault.restore.env import meta as env_meta
from cloudvault.restore.env.checks import run_checks
from cloudvault.restore.env.place import placed
from cloudvault.restore.env.prefix import PrefixScanner
from cloudvault.restore.env.restore import Choices, conda_documents, installed_gpu_fit, recorded
from cloudvault.restore.env.results import EnvMoved, MovePlan
from cloudvault.restore.env.rewrite import relocate
from cloudvault.restore.env.source import MARKER, EnvRecipe, EnvSource, Unpatched, read_marker

CHUNK = 1 << 20


def files_holding(root: Path, old: str) -> dict[str, bool]:
    """rel path -> has a NUL byte, for every regular file under root that holds old."""
    found = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            scanner = PrefixScanner(old.encode())
            with open(path, "rb") as fh:
                while chunk := fh.read(CHUNK):
                    scanner.feed(chunk)
            if scanner.found:
                found[os.path.relpath(path, root)] = scanner.has_nul
    return found


def _tree_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _relocated_copy(source: Path, staging: Path, marker: dict, new: str, name: str, allow_unpatched: bool):
    """source copied into staging and moved from the prefix its marker names to new; the marker updated."""
    old = marker["prefix"]
    shutil.copytree(source, staging, symlinks=True, dirs_exist_ok=True)
    modes = {d: os.stat(d).st_mode & 0o7777 for d, _, _ in os.walk(staging)}
    for folder, mode in modes.items():
        os.chmod(folder, mode | 0o700)  # a read-only folder would refuse the rewrites; its mode comes back below
    conda = env_meta.conda_paths(conda_documents(staging))
    holding = files_holding(staging, old)
    holding.pop(MARKER, None)
    moved = relocate(staging, holding, old, new, conda, marker.get("original_prefix"))
    if moved.unpatched and not allow_unpatched:
        files = ", ".join(f"{u['path']} ({u['why']})" for u in moved.unpatched[:5])
        raise Unpatched(count=len(moved.unpatched), name=name, prefix=new, files=files)
    history = marker.get("moves", []) + [{"from": old, "to": new, "at": now()}]
    doc = marker | {
        "old_prefix": old,
        "prefix": new,
        "rewritten": moved.rewritten,
        "moves": history,
        "unpatched": moved.unpatched,
    }
    (staging / MARKER).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    for folder in sorted(modes, key=len, reverse=True):
        os.chmod(folder, modes[folder] | (0o700 if folder == str(staging) else 0))
    return moved


def move(
    conn: sqlite3.Connection,
    recipe: EnvRecipe,
    env: EnvSource,
    source: Path,
    target: Path,
    choices: Choices = Choices(),
) -> EnvMoved:
    """The env at source (restored by vault: it has a marker) placed at target and source removed; recorded."""
    from cloudvault.restore.env.targets import check_move

    check_move(conn, env.name, source, target)  # before anything moves: a target inside its source, or around it
    return recorded(conn, env, target, lambda: _move(recipe, env, source, target, choices))


def _move(recipe: EnvRecipe, env: EnvSource, source: Path, target: Path, choices: Choices) -> EnvMoved:
    marker = read_marker(source)
    if marker is None:
        raise errors.UsageError(detail=f"{source} has no {MARKER}: only an env vault restored can be moved")
    if os.path.realpath(source) == os.path.realpath(target):
        raise errors.UsageError(detail=f"{source} is already at {target}")
    old, new = marker["prefix"], str(target)
    with placed(env.name, target, int(_tree_size(source) * 1.05), choices.force) as staging:
        moved = _relocated_copy(source, staging.path, marker, new, env.name, choices.allow_unpatched)
    shutil.rmtree(source)
    checks = run_checks(target, recipe.checks_for(env.name)) if choices.smoke else []
    return EnvMoved(
        name=env.name, status="ok", target=new, old_prefix=old, moved_from=str(source),
        archive=marker.get("source"), archive_blake3=marker.get("source_blake3"), files=None,
        rewritten=len(moved.rewritten), unpatched=tuple(moved.unpatched), pyc_removed=moved.pyc_removed,
        pyc_recompiled=moved.pyc_recompiled, pyc_moved=moved.pyc_moved, pyc_note=moved.pyc_note,
        checks=tuple(checks), gpu=installed_gpu_fit(target), pitfalls=tuple(recipe.pitfalls_for(env.name)),
    )  # fmt: skip


def plan_move(recipe: EnvRecipe, env: EnvSource, source: Path, target: Path) -> MovePlan:
    """What --move would do: the prefix its files speak (the marker's), bytes to copy, space, risks."""
    from cloudvault.restore.env.source import free_space

    marker = read_marker(source)
    if marker is None:
        raise errors.UsageError(detail=f"{source} has no {MARKER}: only an env vault restored can be moved")
    need = int(_tree_size(source) * 1.05)
    free = free_space(target.parent)
    risks = recipe.pitfalls_for(env.name)
    if os.path.lexists(target):
        risks.append(f"{target} exists: it is kept unless you pass --force")
    if free < need:
        risks.append(f"not enough space: {free} bytes free, {need} needed")
    return MovePlan(
        name=env.name, moved_from=str(source), old_prefix=marker["prefix"], target=str(target), bytes=need,
        free=free, enough_space=free >= need, exists=os.path.lexists(target), source=marker.get("source"),
        checks=tuple(recipe.checks_for(env.name)), risks=tuple(risks),
    )  # fmt: skip
