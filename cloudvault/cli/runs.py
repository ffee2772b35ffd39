"""List the reproduction runs recorded in the catalog, with their status and verdict (all, or one entry's).

ENTRY is an entry id or unique prefix (`014`); each run shows its id, recipe, executor, status (running,
finished, failed, interrupted), verdict and folder. `--requests RUN_ID` lists one run's per-request verdicts.
A listing only reads the catalog. `vault runs collect [ENTRY]` collects each run left queued by `vault repro
--executor slurm --detach` whose job has ended: its outputs are compared with the record, by the recipe it was
queued with, and its verdict recorded, as if vault had waited; then it lists the runs as `vault runs` does.

  vault runs 014                 014's runs (reads the catalog only)
  vault runs collect 014         collect 014's detached runs whose jobs have ended, then list them
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, catalog_name, with_catalog

COLLECT = "collect"  # `vault runs collect [ENTRY]`: the one spelling that writes (an entry is never named this)


def add_arguments(parser) -> None:
    import argparse  # imported by the grammar already

    parser.add_argument("entry", nargs="?", metavar="ENTRY", type=catalog_name,
                        help="only the runs reproducing this entry")  # fmt: skip
    parser.add_argument("collect_entry", nargs="?", type=catalog_name, help=argparse.SUPPRESS)
    parser.add_argument("--requests", metavar="RUN_ID", help="the per-request verdicts of one run")
    add_output_options(parser)


def _collecting(args) -> bool:
    """`vault runs collect [ENTRY]`: ENTRY moves to where a listing has it."""
    if args.entry == COLLECT:
        args.entry, args.collect_entry = args.collect_entry, True
        return True
    if args.collect_entry is not None:
        raise errors.UsageError(detail=f"vault runs takes one ENTRY, not {args.entry!r} and {args.collect_entry!r}")
    return False


@with_catalog(readonly=lambda args: not _collecting(args))
def run(args, conn) -> int:
    from cloudvault.catalog.query import resolve_entry
    from cloudvault.catalog.records import run_requests, runs
    from cloudvault.cli.ui import UI

    ui = UI(as_json=args.json)
    if args.requests:
        rows = run_requests(conn, args.requests)
        if args.json:
            ui.emit([{"request": r, "verdict": v, "first_divergence": i, "detail": d} for r, v, i, d in rows])
        for request, verdict, index, _ in rows:
            ui.line(f"{verdict:<17} {'' if index is None else index:>7}  {request}")
        if not rows and not runs(conn, run_id=args.requests):
            raise errors.NotFound(detail=f"no run {args.requests!r} is recorded; `vault runs` lists the runs")
        if not rows:
            ui.warn(f"no compared requests recorded for run {args.requests!r}; `vault runs` lists the runs")
        return errors.OK if rows else errors.NOTHING_FOUND
    scope = {}
    if args.entry:
        mirror_id, entry_id, _ = resolve_entry(conn, args.entry)
        scope = {"mirror_id": mirror_id, "entry_id": entry_id}
    found = runs(conn, **scope)
    if args.collect_entry is True and any(_detached(r) for r in found):
        _collect(conn, [r for r in found if _detached(r)], ui)
        found = runs(conn, **scope)
    elif any(_detached(r) for r in found):
        ui.warn(f"{sum(map(_detached, found))} detached run(s) queued or running; `vault runs collect` collects "
                "those whose jobs have ended")  # fmt: skip
    if args.json:
        ui.emit([r._asdict() for r in found])
        return errors.OK if found else errors.NOTHING_FOUND
    if not found:
        ui.line(f"no runs recorded{' for ' + scope.get('entry_id', '') if scope else ''}; try `vault repro --list`")
        return errors.NOTHING_FOUND
    ui.line(f"{'RUN':<{len(found[0].run_id)}}  WHERE  STATUS      VERDICT          STARTED, then the folder")
    for r in found:
        ui.line(f"{r.run_id}  {r.executor}  {r.status:<11} {r.verdict or '-':<16} {r.started_at}")
        ui.line(f"    {r.folder}" + (f"  ({_queue(r).job_label} {r.job_id})" if _queue(r) and r.job_id else ""))
    return errors.OK


def _queue(run):
    """The executor class of a run recorded by one that queues its jobs (Slurm), else None."""
    from cloudvault.repro.executors import EXECUTORS, executor_class

    cls = executor_class(run.executor) if run.executor in EXECUTORS else None
    return cls if cls is not None and cls.queues else None


def _detached(run) -> bool:
    return _queue(run) is not None and run.status in ("queued", "running") and bool(run.job_id)


def _collect(conn, pending: list, ui) -> None:
    """Each detached run (a queueing executor's: Slurm) whose job has ended: collected and recorded."""
    from cloudvault.errors import VaultError
    from cloudvault.repro.executors import executor
    from cloudvault.repro.run import collect_detached

    for run in pending:
        try:
            collected = collect_detached(conn, run, executor(run.executor, ask_timeout=10))  # ask briefly
        except VaultError as exc:  # no Slurm here (another login node?): list the run as it is recorded
            ui.warn(f"cannot collect {run.run_id} ({_queue(run).job_label} {run.job_id}) yet: {exc.message}")
            continue
        if collected.edited:
            ui.warn(collected.edited)
        if collected.status != run.status:
            ui.warn(f"collected {run.run_id} ({_queue(run).job_label} {run.job_id}): {collected.status}")
