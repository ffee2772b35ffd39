"""The runs the catalog records, as `vault runs` asks for them: listed (all, or one entry's), one run's per-request
verdicts, and the detached runs whose jobs have ended collected (compared and recorded as if vault had waited)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from cloudvault.errors import NotFound, VaultError
from cloudvault.repro.outcomes import RequestVerdict, RunRequests, RunsListed


@dataclass(frozen=True)
class RunsOptions:
    """What `vault runs` was asked: one entry's runs (None: all), whether to collect the detached ones first, or
    one run's requests (a run id)."""

    entry: str | None = None
    collect: bool = False
    requests: str | None = None


def recorded_runs(conn: sqlite3.Connection, options: RunsOptions,
                  warn: Callable[[str], None] = lambda text: None) -> RunsListed | RunRequests:  # fmt: skip
    """The runs (options.collect: each detached run whose job has ended collected first, what happened to each
    said through warn), or one run's requests (NotFound when no such run is recorded)."""
    from cloudvault.catalog.query import resolve_entry
    from cloudvault.catalog.records import run_requests, runs

    if options.requests:
        rows = run_requests(conn, options.requests)
        if not rows and not runs(conn, run_id=options.requests):
            raise NotFound(detail=f"no run {options.requests!r} is recorded; `vault runs` lists the runs")
        return RunRequests(options.requests, tuple(RequestVerdict(request=r, verdict=v, first_divergence=i, detail=d)
                                                         for r, v, i, d in rows))  # fmt: skip
    scope = {}
    if options.entry:
        mirror_id, entry_id, _ = resolve_entry(conn, options.entry)
        scope = {"mirror_id": mirror_id, "entry_id": entry_id}
    found = runs(conn, **scope)
    pending = [r for r in found if _detached(r)]
    if options.collect and pending:
        _collect(conn, pending, warn)
        found, pending = runs(conn, **scope), []
    labels = tuple(_queue(r).job_label if _queue(r) else None for r in found)
    return RunsListed(tuple(found), labels, scope.get("entry_id"), 0 if options.collect else len(pending))


def _queue(run):
    """The executor class of a run recorded by one that queues its jobs (Slurm), else None."""
    from cloudvault.repro.executors import EXECUTORS, executor_class

    cls = executor_class(run.executor) if run.executor in EXECUTORS else None
    return cls if cls is not None and cls.queues else None


def _detached(run) -> bool:
    return _queue(run) is not None and run.status in ("queued", "running") and bool(run.job_id)


def _collect(conn: sqlite3.Connection, pending: list, warn: Callable[[str], None]) -> None:
    """Each detached run (a queueing executor's: Slurm) whose job has ended: collected and recorded."""
    from cloudvault.repro.executors import executor
    from cloudvault.repro.run import collect_detached

    for run in pending:
        try:
            collected = collect_detached(conn, run, executor(run.executor, ask_timeout=10))  # ask briefly
        except VaultError as exc:  # no Slurm here (another login node?): list the run as it is recorded
            warn(f"cannot collect {run.run_id} ({_queue(run).job_label} {run.job_id}) yet: {exc.message}")
            continue
        if collected.edited:
            warn(collected.edited)
        if collected.status != run.status:
            warn(f"collected {run.run_id} ({_queue(run).job_label} {run.job_id}): {collected.status}")
