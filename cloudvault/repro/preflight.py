"""Checks before a reproduction starts, each one line: the GPUs are free (the lab's contract: memory.used under
500 MiB), the environment is restored, the output folder is persistent, the instrumentation settings equal the
record's (LOG_SS=2 inflates TPOT about 1.6x: such a run is not comparable, so say so before running)."""

from __future__ import annotations

import os
import sqlite3
from collections import namedtuple
from pathlib import Path

from cloudvault.errors import EnvironmentProblem, Prerequisite
from cloudvault.repro.plan import Plan

Check = namedtuple("Check", "name ok detail")
VOLATILE = ("/tmp", "/dev/shm", "/run")  # gone when the machine or pod stops
POD_VOLATILE = ("/root",)  # a pod's container disk: gone when the pod stops


class PreflightFailed(EnvironmentProblem):
    """preflight {check} failed: {detail} (--force-preflight runs anyway and records it)"""


def run_checks(conn: sqlite3.Connection, plan: Plan, out_explicit: bool) -> list[Check]:
    """The checks before a run; the runner's Python lacking a module the recipe names raises Prerequisite (exit 7)."""
    modules = modules_check(plan)
    if not modules.ok:
        raise Prerequisite(detail=modules.detail)
    return machine_checks(conn, plan, out_explicit)


def dry_run_checks(conn: sqlite3.Connection, plan: Plan, out_explicit: bool) -> list[Check]:
    """Every check, none raising: a dry run says all that a run would miss here, the Python modules first."""
    return [modules_check(plan), *machine_checks(conn, plan, out_explicit)]


def machine_checks(conn: sqlite3.Connection, plan: Plan, out_explicit: bool) -> list[Check]:
    return [
        _gpus_free(plan),
        _environment(conn, plan),
        _persistent(plan.run_dir, out_explicit),
        _instrumentation(plan),
    ]


def modules_check(plan: Plan) -> Check:
    """Whether the runner's Python can import the recipe's [preflight] python_modules (checked before the runner
    or the stand-in starts, not a failed run with the cause in a log); failing, it names the pip install."""
    import subprocess

    needs = plan.recipe.section("preflight")
    modules = list(needs.get("python_modules", []))
    python = plan.processes[0].argv[0] if plan.processes else ""
    if not modules:
        return Check("python", True, "no modules required")
    if not os.path.basename(python).startswith("python"):
        return Check("python", True, "not run by a Python here: nothing this machine can check")  # e.g. in an image
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if not importlib.util.find_spec(m)))"
    env = {**os.environ, **plan.processes[0].env}
    found = subprocess.run([python, "-c", probe, *modules], capture_output=True, text=True, env=env, check=False)
    missing = found.stdout.split() if found.returncode == 0 else modules
    if missing:
        hint = needs.get("install", "pip install " + " ".join(missing))
        return Check("python", False, f"{plan.recipe.name} needs {', '.join(missing)}, which {python} cannot import; "
                                      f"install: {hint}")  # fmt: skip
    return Check("python", True, f"{', '.join(modules)} importable by {python}")


def _gpus_free(plan: Plan) -> Check:
    limit = plan.recipe.section("preflight").get("gpu_free_mib", 500)
    wanted = sorted({p.gpu for p in plan.processes if p.gpu is not None})
    if plan.standin or not wanted:
        return Check("gpu", True, "not needed (the stand-in runs on the CPU)" if plan.standin else "no GPU needed")
    from cloudvault.tools.gpu import local_gpus

    gpus = {g.index: g for g in local_gpus() or []}
    missing = [g for g in wanted if g not in gpus]
    if missing:
        return Check("gpu", False, f"the recipe needs GPUs {wanted}; this machine has {sorted(gpus) or 'none'}")
    busy = [f"GPU {g} uses {gpus[g].memory_used_mib} MiB" for g in wanted if (gpus[g].memory_used_mib or 0) >= limit]
    if busy:
        return Check(
            "gpu", False, f"{'; '.join(busy)} (must be under {limit} MiB: two runs on one GPU run out of memory)"
        )
    return Check("gpu", True, f"GPUs {wanted} free (memory.used < {limit} MiB)")


def _environment(conn: sqlite3.Connection, plan: Plan) -> Check:
    env = plan.recipe.section("environment")
    if plan.standin:
        return Check("environment", True, "not needed (the stand-in is part of vault)")
    if not env:
        return Check("environment", True, "none required")
    from cloudvault.catalog.records import restores

    kind, name = ("docker", env["docker"]) if "docker" in env else ("env", env.get("env_name", env.get("env_recipe")))
    done = [r for r in restores(conn, kind=kind) if r.status == "ok" and r.name == name]
    if not done:
        hint = f"vault restore {kind} {env.get('env_recipe', name)}"
        return Check("environment", False, f"{kind} {name!r} is not restored here; run `{hint}` first")
    misfit = _image_misfit(name, plan) if kind == "docker" else None
    if misfit:
        return Check("environment", False, misfit)
    return Check("environment", True, f"{kind} {name!r} restored at {done[-1].target}")


def _image_misfit(recipe_name: str, plan: Plan) -> str | None:
    """Why the image's CUDA arch list cannot run on a GPU the plan uses ("no kernel image is available"), if so."""
    from cloudvault.restore.docker.source import load_docker_recipe

    recipe = load_docker_recipe(recipe_name)
    fit = image_fit(plan, recipe, None)
    return fit.misfit_line(f"image {recipe_name!r}") if fit else None


def image_fit(plan: Plan, recipe, inspected: dict | None):
    """The image's arch list (tools.cuda: its config as dockerd reports it, else the docker recipe) against the
    local GPUs the plan uses (tools.gpu's one check); None when the plan uses no GPU."""
    from cloudvault.tools import cuda, gpu

    wanted = {p.gpu for p in plan.processes if p.gpu is not None and not plan.standin}
    if not wanted:
        return None
    config = (inspected or {}).get("Config") or {}
    env = dict(e.split("=", 1) for e in config.get("Env") or [] if "=" in e)
    arch = cuda.for_image(env, config.get("Labels") or {}, recipe.arch_list if recipe else None,
                          recipe.name if recipe else "")  # fmt: skip
    return gpu.check_fit(arch.text, arch.source, [g for g in gpu.local_gpus() or [] if g.index in wanted])


def _persistent(run_dir: Path, out_explicit: bool) -> Check:
    where = os.path.realpath(run_dir)
    pod = bool(os.environ.get("RUNPOD_POD_ID") or os.environ.get("KUBERNETES_SERVICE_HOST"))
    volatile = [v for v in VOLATILE + (POD_VOLATILE if pod else ()) if where == v or where.startswith(v + "/")]
    if volatile and not out_explicit:
        return Check("output", False, f"{run_dir} is under {volatile[0]}, which does not survive a restart; "
                                      "choose a persistent folder with --out")  # fmt: skip
    return Check("output", True, f"{run_dir}" + (" (chosen with --out)" if volatile else ""))


def _instrumentation(plan: Plan) -> Check:
    keys = plan.recipe.section("preflight").get("instrumentation", [])
    recorded = plan.settings.get("env", {})
    differ = [f"{k}={plan.env.get(k)} but the record has {k}={recorded.get(k)}" for k in keys
              if str(plan.env.get(k)) != str(recorded.get(k))]  # fmt: skip
    if differ:
        return Check("instrumentation", False, "; ".join(differ) + ": not comparable with the record")
    return Check("instrumentation", True, ", ".join(f"{k}={plan.env.get(k)}" for k in keys) or "no rule")
