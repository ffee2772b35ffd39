"""Re-run a recorded experiment from its recipe and say, request by request, whether it reproduced.

`vault repro --list` lists the recipes (recipes/repro/*.toml and $VAULT_RECIPES/repro/), the entry each
reproduces and its last run's verdict. `vault repro NAME --dry-run` prints the full plan (settings from the
catalog, code@commit, model, inputs, commands, env vars, GPU and CPU assignment, outputs, compare rules) and the
preflight results. `vault repro NAME` stages the inputs from the mirror (verified), runs the processes with the
local executor in a new run folder (default: the XDG data dir's cloudvault/runs/, or --out), compares the outputs
with the recorded folder and writes provenance.json, logs/, compare.csv and REPORT.md there; the run and its
verdict go into the catalog (`vault runs`, `vault search`). `--standin` runs the project's CPU stand-in of the
harness (same flags and files) where there is no GPU or model. A failed preflight exits 6 (`--force-preflight`
runs anyway and records it); Ctrl-C stops the processes and records the run as interrupted (exit 130).
`--executor docker` runs each process in a container of the recipe's image (or --image; mirror read-only, no
network, GPUs by device request); `--executor slurm` submits one sbatch job array (recorded as queued at once,
polled, scancel on Ctrl-C); with `--detach` it returns the job id and `vault runs collect ENTRY` collects the run
later, judged by the recipe it was queued with (kept in the run folder's plan.json).
`--repeat N` runs it N times, each a run folder of its own and a verdict of its own; the timing noise is the
record's own repetitions (the recipe's record.repetitions) plus the batch's earlier runs (docs/repro.md). The
verdict has two axes, outputs and timings: exit 0 when REPRODUCED (every run, with --repeat), 10 when not
(OUTPUTS_DIVERGED, TIMINGS_CHANGED, NOT_COMPARABLE).
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, opened_catalog
from cloudvault.repro.executors import EXECUTORS  # names only: the executor modules load when one runs

MAX_REPEAT = 100  # each repetition is a whole re-run of the experiment


def repeat_count(text: str) -> int:
    """--repeat N: 1 up to MAX_REPEAT runs, checked when parsed (so --dry-run refuses it too)."""
    value = int(text)
    if not 1 <= value <= MAX_REPEAT:
        raise ValueError(text)
    return value


repeat_count.__name__ = f"repeat count (1..{MAX_REPEAT})"


def add_arguments(parser) -> None:
    parser.add_argument("name", nargs="?", metavar="NAME", help="recipe name, unique prefix, or path to a .toml")
    parser.add_argument("--list", action="store_true", help="list the recipes and their last verdicts")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and the preflight; run nothing")
    parser.add_argument("--standin", action="store_true", help="run the CPU stand-in of the harness")
    parser.add_argument("--out", help="folder for the new run folder (default: XDG data dir cloudvault/runs)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="override an env var")
    where = "where the processes run: local processes, docker containers, or a Slurm job array"
    parser.add_argument("--executor", choices=sorted(EXECUTORS), default="local", help=where)
    parser.add_argument("--detach", action="store_true",
                        help="slurm: return once queued; `vault runs collect` collects")  # fmt: skip
    parser.add_argument("--image", help="docker: the image to run in (default: the recipe's docker recipe)")
    parser.add_argument("--partition", help="slurm: the partition (default: the recipe's [slurm], else Slurm's)")
    parser.add_argument("--force-preflight", action="store_true", help="run despite failed preflight checks")
    parser.add_argument("--repeat", type=repeat_count, default=1, metavar="N",
                        help=f"run N times, 1..{MAX_REPEAT} (timing noise: docs/repro.md)")  # fmt: skip
    parser.add_argument("--all", dest="all_rows", action="store_true", help="list identical requests too")
    add_output_options(parser)


def run(args) -> int:
    from cloudvault import config
    from cloudvault.cli.ui import UI

    ui = UI(as_json=args.json)
    if args.list:
        return _list(args, ui)
    if not args.name:
        raise errors.UsageError(detail="vault repro: name a recipe, or --list (see `vault repro --help`)")
    from pathlib import Path

    from cloudvault.repro.plan import RunOptions
    from cloudvault.repro.recipe import load

    recipe = load(args.name)
    base = Path(args.out).expanduser().resolve() if args.out else config.data_home() / "cloudvault" / "runs"
    options = RunOptions(base, bool(args.out), args.standin, dict(_pair(t) for t in args.env), args.force_preflight)
    with opened_catalog(args, readonly=args.dry_run) as conn:
        if args.dry_run:
            return _dry_run(conn, recipe, options, args, ui)
        chosen = _executor(args)
        if args.detach and not chosen.queues:
            raise errors.UsageError(detail="--detach needs --executor slurm (a local or docker run ends with vault)")
        if args.repeat > 1 and args.detach:
            raise errors.UsageError(detail="a detached run is one run: --detach takes no --repeat")
        return _runs(conn, recipe, chosen, options, args, ui)


def _runs(conn, recipe, chosen, options, args, ui) -> int:
    """--repeat N runs (1 by default), each compared with the record; the noise grows with the batch's runs."""
    from cloudvault.repro.compare import PASSING
    from cloudvault.repro.run import Feedback, reproduce, run_rows

    feedback = Feedback((lambda text: None) if args.json else ui.warn, ui.progress("staging"))
    earlier: list[dict] = []
    docs, code = [], errors.OK
    for i in range(args.repeat):
        cmp, prov = reproduce(conn, recipe, _executor(args) if i else chosen, options, feedback, detach=args.detach,
                              more_noise=tuple(earlier))  # fmt: skip
        if cmp is None:
            if args.json:
                ui.emit({"run_id": prov["run_id"], "job_id": prov["job_id"], "status": "queued"})
            ui.line(f"run {prov['run_id']}: Slurm job {prov['job_id']} queued; "
                    f"`vault runs collect {recipe.entry}` collects it")  # fmt: skip
            return errors.OK
        if args.repeat > 1 and not args.json:
            ui.line(f"run {i + 1} of {args.repeat}")
        docs.append(_shown(cmp, prov, args, ui))
        if cmp.verdict not in PASSING:
            code = errors.REPRO_MISMATCH
        if recipe.kind == "harness":
            earlier.append(run_rows(prov["plan"]["run_dir"]))
    if args.json:
        ui.emit(docs[0] if args.repeat == 1 else {"runs": docs, "verdicts": [d["verdict"] for d in docs]})
    return code


def _shown(cmp, prov, args, ui) -> dict:
    """One run's comparison on the terminal (not with --json); its document."""
    from pathlib import Path

    from cloudvault.cli.views import compare as view
    from cloudvault.repro import report

    doc = {**report.document(cmp, prov["plan"]["record"]["folder"], prov["run_id"]), "run_id": prov["run_id"],
           "folder": str(Path(prov["plan"]["run_dir"]))}  # fmt: skip
    if not args.json:
        view.show(ui, cmp, all_rows=args.all_rows)
        ui.line(f"run {prov['run_id']}: {prov['plan']['run_dir']}/REPORT.md")
    return doc


def _executor(args):
    """The executor --executor names, with its own options."""
    from cloudvault.repro.executors import executor

    own = {"docker": {"image": args.image, "catalog": args.catalog}, "slurm": {"partition": args.partition}}
    return executor(args.executor, **own.get(args.executor, {}))


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise errors.UsageError(detail=f"--env wants KEY=VALUE, not {text!r}")
    return key, value


def _list(args, ui) -> int:
    from pathlib import Path

    from cloudvault import config
    from cloudvault.recipe import recipe_names
    from cloudvault.repro.recipe import KIND, load

    last = _last_runs(Path(config.catalog_path(args.catalog)))
    rows = []
    for name in recipe_names(KIND):
        recipe = load(name)
        run = last.get(name)
        rows.append({"recipe": name, "entry": recipe.entry, "kind": recipe.kind,
                     "description": recipe.data.get("description", ""), "last_run": run and run.run_id,
                     "status": run and run.status, "verdict": run and run.verdict})  # fmt: skip
    if args.json:
        ui.emit(rows)
    for r in rows:
        verdict = f"{r['verdict'] or r['status']} ({r['last_run']})" if r["last_run"] else "never run"
        ui.line(f"{r['recipe']:<22} {r['entry']:<16} {r['kind']:<8} {verdict}")
        ui.line(f"    {r['description']}")
    return errors.OK


def _last_runs(catalog) -> dict:
    """recipe name -> its latest run, when there is a catalog."""
    from cloudvault.catalog.records import runs

    if not catalog.exists():
        return {}
    with opened_catalog(path=catalog, readonly=True) as conn:
        return {r.recipe: r for r in runs(conn)}


def _dry_run(conn, recipe, options, args, ui) -> int:
    from cloudvault.repro import plan as planning
    from cloudvault.repro.executors import with_executor_checks
    from cloudvault.repro.executors.local import LocalExecutor
    from cloudvault.repro.preflight import dry_run_checks
    from cloudvault.repro.run import new_run_dir

    _, run_dir = new_run_dir(conn, options.base, recipe)
    plan = planning.build(conn, recipe, run_dir, options)
    chosen = _executor(args)
    checks = with_executor_checks(dry_run_checks(conn, plan, options.out_explicit), chosen, plan)
    doc = {**planning.describe(plan), "settings": plan.settings, "preflight": [c._asdict() for c in checks]}
    doc["not_comparable_here"] = _no_gpu_here(conn, plan) if chosen.runs_here else None
    doc["gpus_here"] = _gpus_here(plan) if chosen.runs_here else []
    if args.json:
        ui.emit(doc)
    else:
        processes = LocalExecutor().describe(plan)
        _print_plan(ui, doc, processes, plan)  # the commands as processes; then where they run, when that is elsewhere
        if (where := chosen.describe(plan)) != processes:
            ui.heading(f"{chosen.name} executor")
            for line in where:
                ui.line(f"  {line}")
        for gpu in doc["gpus_here"]:
            ui.line(f"  GPU {gpu['index']}: {gpu['name']}, compute capability {gpu['compute_cap']} ({gpu['sm']}), "
                    f"{gpu['memory_used_mib']} of {gpu['memory_total_mib']} MiB used")  # fmt: skip
        if doc["not_comparable_here"]:
            ui.line(f"NOT_COMPARABLE here: {doc['not_comparable_here']}")
    return _dry_run_exit(checks, args.force_preflight)


def _dry_run_exit(checks, forced: bool) -> int:
    """The exit the run would have: 7 when the runner's Python lacks a module (checked first, never forced),
    6 when another check fails and --force-preflight is not given, else 0."""
    failed = {c.name for c in checks if not c.ok}
    if "python" in failed:
        return errors.PREREQUISITE
    return errors.ENVIRONMENT if failed and not forced else errors.OK


def _gpus_here(plan) -> list[dict]:
    """The GPUs of this machine that the plan's processes use: name, compute capability, memory used."""
    from cloudvault.tools.gpu import local_gpus

    wanted = {p.gpu for p in plan.processes if p.gpu is not None}
    if plan.standin or not wanted:
        return []
    return [{"index": g.index, "name": g.name, "compute_cap": g.cap_text, "sm": g.sm,
             "memory_used_mib": g.memory_used_mib, "memory_total_mib": g.memory_total_mib}
            for g in local_gpus() or [] if g.index in wanted]  # fmt: skip


def _no_gpu_here(conn, plan) -> str | None:
    """Why a run on this machine could not compare with a GPU record (it has no GPU), or None."""
    import json

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


def _print_plan(ui, doc: dict, commands: list[str], plan) -> None:
    ui.heading(f"{doc['recipe']} reproduces {doc['entry']} ({doc['kind']}; runner: {doc['runner']})")
    ui.line(f"  record     {doc['entry']}/{doc['record']['folder']} {' '.join(doc['record']['files'])}".rstrip())
    ui.line(f"  run folder {doc['run_dir']} (new)")
    if doc["environment"]:
        ui.line(f"  env        {', '.join(f'{k}={v}' for k, v in doc['environment'].items())}")
    if doc["code"].get("path"):
        ui.line(
            f"  code       {doc['code'].get('entry', doc['entry'])}/{doc['code']['path']} @ {doc['code'].get('commit')}"
        )
    if doc["model"]:
        ui.line(f"  model      {doc['model'].get('entry', doc['entry'])}/{doc['model']['path']}")
    for i in doc["inputs"]:
        ui.line(
            f"  input      {i['name']}: {i['files']} file(s), {i['bytes']:,} B from {', '.join(i['from'])}"
            f" -> {i['dest']}"
        )
    if doc["docs"]:
        d = doc["docs"]
        roles = ", ".join(f"{n} {role}" for role, n in d["requests"].items())
        ui.line(
            f"  docs       {d['documents']} documents, requests: {roles}, on {d['gpus']} GPUs; prompts "
            f"{d['prompt_tokens'][0]:,}..{d['prompt_tokens'][1]:,} tokens; clip length {d['clip_length']:,}"
        )
    settings = {k: v for k, v in doc["settings"].items() if not isinstance(v, dict | list) and len(str(v)) < 40}
    ui.line("  settings   " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    ui.line("  env vars   " + (" ".join(f"{k}={v}" for k, v in doc["env"].items()) or "-"))
    ui.line(f"  command    {commands[0].split(': ', 1)[1]}")
    from cloudvault.repro.plan import cores_here, pinnable

    pins = [p.cpu_cores for p in plan.processes if p.cpu_cores]  # the plan's core lists, not the document's text
    spans = [(cores[0], cores[-1]) for cores in pins]
    pinned = all(pinnable(cores) for cores in pins)
    where = [f"{p['name']} ({' '.join(f'{k}={v}' for k, v in p['env'].items())}"
             f"{', cores ' + p['cpu_cores'] if p['cpu_cores'] and pinned else ''})"
             for p in doc["processes"]]  # fmt: skip
    each = " (one GPU each)" if any(p["gpu"] is not None for p in doc["processes"]) else ""
    ui.line(f"  processes  {len(where)}{each}: {'; '.join(where)}")
    if not pinned:
        ui.line(f"  cores      the recipe pins cores {min(a for a, _ in spans)}-{max(b for _, b in spans)}; this "
                f"machine has {cores_here()}: not pinned")  # fmt: skip
    ui.line(
        f"  outputs    {', '.join(doc['outputs'])}"
        + (f" (merged from {', '.join(doc['merge'].values())})" if doc["merge"] else "")
    )
    ui.line("  compare    " + ", ".join(f"{c} {r}" for c, r in doc["compare"]["rules"].items()))
    if doc["compare"]["settings"]:
        ui.line(f"  settings compared: {', '.join(doc['compare']['settings'])}")
    ui.heading("preflight")
    for c in doc["preflight"]:
        ui.line(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['name']:<16} {c['detail']}")
