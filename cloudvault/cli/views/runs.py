"""`vault runs` on a terminal: the runs recorded, one line and its folder each, or one run's per-request verdicts;
and what a listing left for `vault runs collect`."""

from __future__ import annotations

from cloudvault.repro.outcomes import RunRequests, RunsListed


def show(ui, result: RunsListed | RunRequests) -> None:
    if isinstance(result, RunRequests):
        show_requests(ui, result)
    else:
        show_runs(ui, result)


def show_runs(ui, listed: RunsListed) -> None:
    if not listed.runs:
        ui.line(f"no runs recorded{' for ' + listed.entry if listed.entry else ''}; try `vault repro --list`")
        return
    ui.line(f"{'RUN':<{len(listed.runs[0].run_id)}}  WHERE  STATUS      VERDICT          STARTED, then the folder")
    for r, label in zip(listed.runs, listed.job_labels, strict=True):
        ui.line(f"{r.run_id}  {r.executor}  {r.status:<11} {r.verdict or '-':<16} {r.started_at}")
        ui.line(f"    {r.folder}" + (f"  ({label} {r.job_id})" if label and r.job_id else ""))


def show_requests(ui, listed: RunRequests) -> None:
    for r in listed.requests:
        ui.line(f"{r.verdict:<17} {'' if r.first_divergence is None else r.first_divergence:>7}  {r.request}")


def warn(ui, result: RunsListed | RunRequests) -> None:
    """On stderr, --json or not: detached runs a listing left uncollected, or a run with no compared request."""
    if isinstance(result, RunsListed) and result.uncollected:
        ui.warn(f"{result.uncollected} detached run(s) queued or running; `vault runs collect` collects those whose "
                "jobs have ended")  # fmt: skip
    if isinstance(result, RunRequests) and not result.requests:
        ui.warn(f"no compared requests recorded for run {result.run_id!r}; `vault runs` lists the runs")
