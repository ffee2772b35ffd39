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
from cloudvault.cli.common import add_output_options, bounded_int, opened_catalog
from cloudvault.repro.executors import EXECUTORS  # names only: the executor modules load when one runs

MAX_REPEAT = 100  # each repetition is a whole re-run of the experiment
# --repeat N, checked when parsed (so --dry-run refuses it too)
repeat_count = bounded_int(1, MAX_REPEAT, f"repeat count (1..{MAX_REPEAT})")


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
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import repro as view
    from cloudvault.repro.actions import LIST, RUN, repro

    ui = UI(as_json=args.json)
    options = _options(args)
    with opened_catalog(args, readonly=options.mode != RUN, optional=options.mode == LIST) as conn:
        result = repro(conn, options, view.feedback(ui, options, all_rows=args.all_rows))
    ui.present(result, view.show)
    return result.exit_code


def _options(args):
    """The mode the flags name and, unless it is --list, the recipe (loaded) and how to run it."""
    from pathlib import Path

    from cloudvault import config
    from cloudvault.repro.actions import DRY_RUN, LIST, RUN, ExecutorChoice, ReproOptions
    from cloudvault.repro.plan import RunOptions
    from cloudvault.repro.recipe import load

    if args.list:
        return ReproOptions(LIST)
    if not args.name:
        raise errors.UsageError(detail="vault repro: name a recipe, or --list (see `vault repro --help`)")
    recipe = load(args.name)
    base = Path(args.out).expanduser().resolve() if args.out else config.data_home() / "cloudvault" / "runs"
    how = RunOptions(base, bool(args.out), args.standin, dict(_pair(t) for t in args.env), args.force_preflight)
    where = ExecutorChoice(args.executor, args.image, args.catalog, args.partition)
    return ReproOptions(DRY_RUN if args.dry_run else RUN, recipe, how, where, args.repeat, args.detach)


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise errors.UsageError(detail=f"--env wants KEY=VALUE, not {text!r}")
    return key, value
