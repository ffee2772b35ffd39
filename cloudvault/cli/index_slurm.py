"""Index across a Slurm cluster: `vault index slurm plan --tasks N`, then `status`, `resume`, `merge`.

One job array scans the archives into shards, one dependent job merges them into the catalog; every node must see
the mirror and the catalog's folder (shared storage). `slurm` is the first word after `index`; a mirror folder
named slurm is given as `vault index ./slurm`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cloudvault import errors
from cloudvault.cli.common import add_output_options, bounded_int

# the old spellings (`vault index --slurm N` ...), kept one release: mode -> (old words, new words)
OLD_SPELLINGS = {"slurm": ("--slurm N", "plan --tasks N"), "status": ("--status", "status"),
                 "resume": ("--resume", "resume"), "merge": ("--merge", "merge")}  # fmt: skip


MAX_TASKS = 256
task_count = bounded_int(1, MAX_TASKS, f"task count (1 to {MAX_TASKS})")  # tasks of the job array


def bandwidth(text: str) -> float:
    """A filesystem's read bandwidth in GB/s: more than 0."""
    import math

    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(text)
    return value


bandwidth.__name__ = "bandwidth in GB/s (more than 0)"


def add_arguments(parser) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True, parser_class=type(parser),
                                  prog="vault index slurm")  # fmt: skip

    def verb(name: str, summary: str, description: str, run):
        sub = verbs.add_parser(name, help=summary, description=description, prog=f"vault index slurm {name}")
        sub.set_defaults(run=run, parser=sub)
        return sub

    plan = verb("plan", "plan the archives into N tasks; submit a job array and a merge job",
                "Plan the archives a local `vault index` would read (new or changed) into at most N tasks, "
                "bin-packed\nby compressed size, then submit an N-task job array and a merge job that depends on it.",
                run_plan)  # fmt: skip
    plan.add_argument("mirrors", nargs="*", metavar="MIRROR", help="mirror roots; none: the known ones")
    plan.add_argument("--tasks", type=task_count, required=True, metavar="N", help="tasks of the job array")
    plan.add_argument("--mirror", dest="definition", help="a mirror definition TOML or a built-in name")
    plan.add_argument("--partition", help="Slurm partition for the jobs (default: the cluster's)")
    plan.add_argument("--dry-run", action="store_true", help="print the plan, both scripts and a simulated wall time")
    plan.add_argument("--fs-gbps", type=bandwidth, help="with --dry-run: the filesystem's read bandwidth, GB/s")
    add_output_options(plan, quiet=True)
    status = verb("status", "per task: archives and bytes done, MB/s, state",
                  "The plan's jobs and, per task, archives and bytes done, MB/s and state.", run_status)  # fmt: skip
    add_output_options(status)
    resume = verb("resume", "resubmit the tasks whose shards are missing or bad",
                  "Submit again only the tasks without a good shard, and a new merge job after them.",
                  run_resume)  # fmt: skip
    resume.add_argument("--partition", help="Slurm partition for the jobs (default: the cluster's)")
    add_output_options(resume)
    merge = verb("merge", "merge the finished plan's shards into the catalog",
                 "By hand, what the merge job does: check every shard against the plan, commit them, index the rest.",
                 run_merge)  # fmt: skip
    merge.add_argument("--wait", action="store_true", help="wait for another indexer on this catalog to finish")
    add_output_options(merge, quiet=True)


def run_plan(args) -> int:
    from cloudvault.index import slurm

    options = slurm.SlurmOptions(tuple(args.mirrors), args.definition, args.tasks, args.partition, args.dry_run,
                                 args.fs_gbps)  # fmt: skip
    return _present(args, slurm.plan_and_submit(_catalog(args), options))


def run_status(args) -> int:
    from cloudvault.index import slurm

    return _present(args, slurm.status(slurm.Layout(_catalog(args))))


def run_resume(args) -> int:
    from cloudvault.index import slurm

    return _present(args, slurm.resume(slurm.Layout(_catalog(args)), args.partition), resumed=True)


def run_merge(args) -> int:
    from cloudvault.index.slurm_merge import merge_plan

    return _present(args, merge_plan(_catalog(args), wait=args.wait, progress=_ui(args).progress("merging")))


def old_spelling(args) -> int:
    """`vault index --slurm N | --status | --resume | --merge`: a note naming the new spelling, then its run."""
    modes = [mode for mode in OLD_SPELLINGS if getattr(args, mode)]
    if len(modes) > 1:
        raise errors.UsageError(detail=f"--{modes[0]} and --{modes[1]} cannot be combined")
    if args.dry_run and not args.slurm:
        raise errors.UsageError(detail="--dry-run goes with --slurm N")
    if args.fs_gbps is not None and args.fs_gbps <= 0:
        raise errors.UsageError(detail="--fs-gbps must be a positive bandwidth in GB/s")
    old, new = OLD_SPELLINGS[modes[0]]
    sys.stderr.write(f"vault: note: `vault index {old}` is now `vault index slurm {new}`; the old spelling goes in "
                     "the next release\n")  # fmt: skip
    args.tasks = args.slurm
    runs = {"slurm": run_plan, "status": run_status, "resume": run_resume, "merge": run_merge}
    return runs[modes[0]](args)


def _catalog(args) -> Path:
    from cloudvault import config

    return Path(config.catalog_path(args.catalog, writing=True)).absolute()  # the jobs may start in another folder


def _ui(args):
    from cloudvault.cli.ui import UI

    return UI(as_json=args.json, quiet=getattr(args, "quiet", False))  # `status` and `resume` have no --quiet


def _present(args, result, *, resumed: bool = False) -> int:
    """The result's document (--json) or its lines; exit 5 when a merge found damage."""
    from cloudvault.cli.views import index_slurm as view
    from cloudvault.index.slurm import Layout

    ui = _ui(args)
    if args.json:
        view.emit(ui, result)
    else:
        view.show(ui, result, Layout(_catalog(args)), resumed=resumed)
    return errors.INTEGRITY if getattr(result, "damaged", False) else errors.OK
