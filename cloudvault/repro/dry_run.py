"""What `vault repro NAME --dry-run` says, nothing run or written: the full plan resolved against the catalog, the
preflight (the executor's checks in place of the local ones they replace), the GPUs here the plan would use, and
why a run here could not compare with a GPU record."""

from __future__ import annotations

import json
import sqlite3

from cloudvault.repro import plan as planning
from cloudvault.repro.outcomes import DryRun, GpuHere, RecipeListed
from cloudvault.repro.recipe import Recipe


def dry_run(conn: sqlite3.Connection, recipe: Recipe, executor, options: planning.RunOptions) -> DryRun:
    """The plan a run would follow (in the run folder it would get) and its preflight, run by executor."""
    from cloudvault.repro.executors import with_executor_checks
    from cloudvault.repro.executors.local import LocalExecutor
    from cloudvault.repro.preflight import dry_run_checks
    from cloudvault.repro.run import new_run_dir

    _, run_dir = new_run_dir(conn, options.base, recipe)
    plan = planning.build(conn, recipe, run_dir, options)
    checks = with_executor_checks(dry_run_checks(conn, plan, options.out_explicit), executor, plan)
    processes = tuple(LocalExecutor().describe(plan))
    where = tuple(executor.describe(plan))
    return DryRun(
        planning.describe(plan), plan.settings, tuple(checks),
        no_gpu_here(conn, plan) if executor.runs_here else None,
        tuple(gpus_here(plan)) if executor.runs_here else (),
        processes, executor.name, where if where != processes else (),
        tuple(tuple(p.cpu_cores) for p in plan.processes if p.cpu_cores), options.force_preflight,
    )  # fmt: skip


def gpus_here(plan) -> list[GpuHere]:
    """The GPUs of this machine that the plan's processes use: name, compute capability, memory used."""
    from cloudvault.tools.gpu import local_gpus

    wanted = {p.gpu for p in plan.processes if p.gpu is not None}
    if plan.standin or not wanted:
        return []
    return [GpuHere(g.index, g.name, g.cap_text, g.sm, g.memory_used_mib, g.memory_total_mib)
            for g in local_gpus() or [] if g.index in wanted]  # fmt: skip


def no_gpu_here(conn: sqlite3.Connection, plan) -> str | None:
    """Why a run on this machine could not compare with a GPU record (it has no GPU), or None."""
    from cloudvault.repro import results
    from cloudvault.repro.run import RUN_ABOUT
    from cloudvault.tools.gpu import local_gpus

    wanted = sorted({p.gpu for p in plan.processes if p.gpu is not None})
    if plan.standin or not wanted or local_gpus():
        return None
    about = results.read_mirror(conn, plan.mirror_id, plan.entry_id, plan.record_folder, (RUN_ABOUT,))
    ran_on = json.loads(about[RUN_ABOUT]).get("settings", {}).get("gpu") if about else None
    return (f"no GPU (the recipe runs on GPU {', '.join(map(str, wanted))}; nvidia-smi finds none here)"
            + (f"; the record ran on {ran_on}" if ran_on else ""))  # fmt: skip


def list_recipes(conn: sqlite3.Connection | None) -> tuple[RecipeListed, ...]:
    """Every repro recipe (shipped and $VAULT_RECIPES/repro/) with its last run in the catalog (conn None: none)."""
    from cloudvault.catalog.records import runs
    from cloudvault.recipe import recipe_names
    from cloudvault.repro.recipe import KIND, load

    last = {r.recipe: r for r in runs(conn)} if conn is not None else {}
    found = []
    for name in recipe_names(KIND):
        recipe = load(name)
        run = last.get(name)
        found.append(RecipeListed(name, recipe.entry, recipe.kind, recipe.data.get("description", ""),
                                  run and run.run_id, run and run.status, run and run.verdict))  # fmt: skip
    return tuple(found)
