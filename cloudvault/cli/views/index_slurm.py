"""`vault index slurm plan|status|resume|merge` on a terminal: each mode's result said in lines."""

from __future__ import annotations

from cloudvault.cli.ui import human_size
from cloudvault.index.slurm_results import (
    AlreadyMerged,
    Merged,
    NothingToSubmit,
    SlurmDryRun,
    SlurmStatus,
    Submitted,
)


def emit(ui, result) -> None:
    """--json: the result's document (nothing for a plan with nothing to submit, as before)."""
    if not isinstance(result, NothingToSubmit):
        ui.emit(result.to_json())


def show(ui, result, lay, *, resumed: bool = False) -> None:
    if isinstance(result, Merged):
        _show_merged(ui, result)
    elif isinstance(result, SlurmStatus):
        _show_status(ui, result)
    elif isinstance(result, SlurmDryRun):
        _show_dry_run(ui, lay, result)
    elif isinstance(result, NothingToSubmit):
        ui.line("nothing for Slurm: every archive is indexed as it is now; `vault index` reads the rest")
    elif isinstance(result, AlreadyMerged):
        ui.line(f"plan {result.plan[:12]} is already merged: nothing to resume")
    elif isinstance(result, Submitted):
        _show_submitted(ui, result, "resumed" if resumed else "submitted")


def _show_merged(ui, result: Merged) -> None:
    info, r = result.info, result.report
    if result.already:
        ui.line(f"plan {info['plan'][:12]} was merged at {info['at']}: nothing to do")
    elif not ui.quiet:
        ui.line(f"merged plan {info['plan'][:12]} into {result.catalog}: {info['from_shards']} archives from "
                f"{info['shards']} shards; {r.files_seen} files seen, {r.files_read} read ({human_size(r.bytes_read)}, "
                f"archives by the tasks), {r.files_unchanged} unchanged, {r.files_deleted} removed; "
                f"{r.members_indexed} members, {r.seconds:.2f} s")  # fmt: skip
        for kind, n in sorted(r.flags.items()):
            ui.line(f"  flagged: {n} {kind.replace('_', ' ')}")


def _show_submitted(ui, s: Submitted, verb: str) -> None:
    tasks = f"array job {s.array} (tasks {','.join(map(str, s.tasks))})" if s.array else "no tasks"
    depend = f", afterok:{s.array}" if s.array else ""
    ui.line(f"{verb} plan {s.plan[:12]}: {tasks}; merge job {s.merge}{depend}")
    ui.line("follow it with `vault index slurm status`")


def _show_dry_run(ui, lay, d: SlurmDryRun) -> None:
    plan, n = d.plan, d.archives
    total = sum(t["bytes"] for t in plan["tasks"])
    ui.line(f"plan {plan['hash'][:12]}: {len(plan['tasks'])} tasks, {n} archives, {human_size(total)} "
            "(bin-packed by compressed size, largest first)" if n else "plan: every archive is indexed as it is "
            "now; nothing to submit")  # fmt: skip
    for i, task in enumerate(plan["tasks"]):
        ui.line(f"  task {i}  {len(task['archives'])} archives  {human_size(task['bytes'])}")
        for a in task["archives"]:
            ui.line(f"      {a['path']}  {human_size(a['size'])}")
    scripts = (("array job", d.array_script, "job.sbatch"), ("merge job", d.merge_script, "merge.sbatch"))
    for title, script, name in scripts if plan["tasks"] else ():
        ui.line(f"{title} ({lay.folder / name}):")
        for line in script.splitlines():
            ui.line(f"  {line}")
    m = d.measured
    ui.line(f"measured: {m.archives} archive(s), {human_size(m.bytes)} scanned by one task's code at "
            f"{human_size(m.bytes_per_s)}/s")  # fmt: skip
    fs = f"filesystem {d.fs_gbps} GB/s" if d.fs_gbps else "no filesystem limit given (--fs-gbps)"
    what = "the plan" if d.simulated == "plan" else "a full re-index of the catalog's recorded archives"
    ui.line(f"simulated wall time for {what} ({fs}; merge not included):")
    ui.line(f"  {'tasks':>5}  {'wall':>9}  {'speed-up':>8}  limited by")
    for row in d.simulation:
        ui.line(f"  {row.tasks:>5}  {row.seconds:>8.1f}s  {row.speedup:>7.2f}x  {row.limited_by}")


def _show_status(ui, s: SlurmStatus) -> None:
    ui.line(f"plan {s.plan[:12]} for {s.catalog}: array job {s.array or '-'}, merge job "
            f"{s.merge or '-'}: {s.merge_state}")  # fmt: skip
    ui.line(f"  {'task':>4}  {'archives':>8}  {'bytes':>21}  {'MB/s':>7}  state")
    for t in s.tasks:
        done = t.archives if t.finished else t.archives_done
        got = t.bytes if t.finished else t.bytes_done
        rate = f"{t.mb_s:.1f}" if t.mb_s is not None else "-"
        size = f"{human_size(got)}/{human_size(t.bytes)}"
        ui.line(f"  {t.task:>4}  {done:>3}/{t.archives:<4}  {size:>21}  {rate:>7}  {t.state}")
