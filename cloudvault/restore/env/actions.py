"""The three things `vault restore env` does, each one call from the command line: list the envs a recipe finds,
plan their restore (or a move), restore (or move) them; each returns a frozen result (results.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cloudvault import errors
from cloudvault.progress import Progress
from cloudvault.restore.env.restore import Choices
from cloudvault.restore.env.results import EnvList, EnvPlans, EnvsRestored
from cloudvault.restore.env.source import ChecksFailed, EnvRecipe, EnvSource, local_caps


@dataclass(frozen=True)
class EnvOptions:
    """What the user asked of `vault restore env`: which envs, where (--prefix, --to), a move's source (--move),
    and the choices of a restore (--force, --allow-unpatched, --no-checks, --python)."""

    names: tuple[str, ...] = ()
    prefix: str | None = None
    to: str | None = None
    move: Path | None = None
    choices: Choices = field(default_factory=Choices)


def list_envs(conn: sqlite3.Connection, recipe: EnvRecipe, options: EnvOptions) -> EnvList:
    """`--list`: each env the recipe finds (or the ones named), from member names alone."""
    from cloudvault.restore.env.source import describe

    caps = local_caps()
    envs = tuple(describe(conn, env, caps) for env in picked(conn, recipe, options))
    return EnvList(recipe.name, recipe.data["entry"], envs, tuple(recipe.skipped), recipe.data["archives"])


def plan_envs(conn: sqlite3.Connection, recipe: EnvRecipe, options: EnvOptions) -> EnvPlans:
    """`--dry-run`: what restoring (or moving) each env would do, every target checked; nothing written."""
    from cloudvault.restore.env.move import plan_move
    from cloudvault.restore.env.restore import plan

    placed = placements(conn, picked(conn, recipe, options), options)
    if options.move:
        target, env = placed[0]
        return EnvPlans(recipe.name, (plan_move(recipe, env, options.move, target),))
    caps = local_caps()
    return EnvPlans(recipe.name, tuple(plan(conn, recipe, env, target, caps) for target, env in placed))


def restore_envs(conn: sqlite3.Connection, recipe: EnvRecipe, options: EnvOptions,
                 progress: Callable[[str], Progress] = lambda label: Progress(),
                 each: Callable = lambda result: None) -> EnvsRestored:  # fmt: skip
    """Each env restored (or moved with --move), shallowest first (a conda root before the envs inside it); each
    result handed to each() as it ends. Failed smoke checks are in the result (EnvsRestored.failure)."""
    from cloudvault.restore.env.move import move
    from cloudvault.restore.env.restore import restore

    results = []
    for target, env in placements(conn, picked(conn, recipe, options), options):
        if options.move:
            result = move(conn, recipe, env, options.move, target, options.choices)
        else:
            result = restore(conn, recipe, env, target, options.choices, progress=progress(f"restoring {env.name}"))
        results.append(result)
        each(result)
    return EnvsRestored(recipe.name, tuple(results))


def failure(result) -> ChecksFailed | None:
    """ChecksFailed (exit 6) naming each smoke check of a restore that failed, or None (a list, a plan: None)."""
    failed = result.failed_checks() if isinstance(result, EnvsRestored) else []
    if not failed:
        return None
    return ChecksFailed(name=", ".join(r.name for r in result.restored),
                        prefix=", ".join(r.target for r in result.restored), failed="; ".join(failed))  # fmt: skip


def picked(conn: sqlite3.Connection, recipe: EnvRecipe, options: EnvOptions) -> list[EnvSource]:
    """The envs named (all when none), of those the recipe finds in the catalog; none found is NotFound."""
    envs = recipe.pick(recipe.discover(conn), list(options.names))
    if not envs:
        raise errors.NotFound(
            detail=f"recipe {recipe.name} finds no env archive matching "
            f"{recipe.data['archives']!r} in entry {recipe.data['entry']}"
        )
    return envs


def placements(conn: sqlite3.Connection, envs: list[EnvSource], options: EnvOptions) -> list:
    """(target, env) for each env, every target (and a move's source) checked before anything is written."""
    from cloudvault.restore.env.targets import placements as checked_placements
    from cloudvault.restore.env.targets import refuse_unsafe

    for env in envs:
        refuse_unsafe(env)
    if options.move and (len(envs) != 1 or not (options.prefix or options.to)):
        raise errors.UsageError(detail="--move FROM moves one named env: give ENV and --prefix or --to")
    if options.prefix and len(envs) != 1:
        names = ", ".join(e.name for e in envs)
        raise errors.UsageError(detail=f"--prefix places one env; name it (one of: {names})")
    return checked_placements(conn, envs, options.prefix, options.to, options.choices.force, options.move)
