"""`vault repro` on a terminal: the recipes and their last verdicts, the dry run's plan and preflight, each run
as it is judged (the comparison's view, cli/views/compare.py), a queued run."""

from __future__ import annotations

from cloudvault.cli.views import compare
from cloudvault.repro.actions import RUN
from cloudvault.repro.outcomes import DryRun, RecipesListed, RunQueued
from cloudvault.repro.plan import cores_here, pinnable
from cloudvault.repro.run import Feedback


def show(ui, result) -> None:
    """What is left to say once the operation returns: the list, the dry run, a queued run (a run's batch was
    said run by run, as each was judged: feedback)."""
    if isinstance(result, RecipesListed):
        show_list(ui, result)
    elif isinstance(result, DryRun):
        show_dry_run(ui, result)
    elif isinstance(result, RunQueued):
        show_queued(ui, result)


def feedback(ui, options, *, all_rows: bool = False) -> Feedback | None:
    """How a run goes, on the terminal: warnings, the staging bar, each run of the batch as it is judged (with
    --json: the document at the end alone). None for a list or a dry run."""
    if options.mode != RUN:
        return None

    def judged(i, one) -> None:
        if not ui.as_json:
            show_judged(ui, one, i, options.repeat, all_rows=all_rows)

    return Feedback((lambda text: None) if ui.as_json else ui.warn, ui.progress("staging"), judged)


def show_list(ui, listed) -> None:
    for r in listed.recipes:
        verdict = f"{r.verdict or r.status} ({r.last_run})" if r.last_run else "never run"
        ui.line(f"{r.recipe:<22} {r.entry:<16} {r.kind:<8} {verdict}")
        ui.line(f"    {r.description}")


def show_judged(ui, run, index: int, repeat: int, *, all_rows: bool = False) -> None:
    """One run as it ends: which of the batch, the comparison, where its report is."""
    if repeat > 1:
        ui.line(f"run {index + 1} of {repeat}")
    compare.show(ui, run.comparison, all_rows=all_rows)
    ui.line(f"run {run.run_id}: {run.folder}/REPORT.md")


def show_queued(ui, queued) -> None:
    ui.line(f"run {queued.run_id}: Slurm job {queued.job_id} queued; "
            f"`vault runs collect {queued.entry}` collects it")  # fmt: skip


def show_dry_run(ui, planned) -> None:
    """The plan (the commands as processes), then where the executor runs them when that is elsewhere, the GPUs
    here, and why a run here could not compare."""
    _show_plan(ui, planned.plan, planned.settings, planned.processes, planned.pins)
    ui.heading("preflight")
    for c in planned.preflight:
        ui.line(f"  {'ok  ' if c.ok else 'FAIL'} {c.name:<16} {c.detail}")
    if planned.elsewhere:
        ui.heading(f"{planned.executor} executor")
        for line in planned.elsewhere:
            ui.line(f"  {line}")
    for gpu in planned.gpus_here:
        ui.line(f"  GPU {gpu.index}: {gpu.name}, compute capability {gpu.compute_cap} ({gpu.sm}), "
                f"{gpu.memory_used_mib} of {gpu.memory_total_mib} MiB used")  # fmt: skip
    if planned.not_comparable_here:
        ui.line(f"NOT_COMPARABLE here: {planned.not_comparable_here}")


def _show_plan(ui, plan, run_settings: dict, commands: tuple[str, ...], pins: tuple[tuple[int, ...], ...]) -> None:
    ui.heading(f"{plan.recipe} reproduces {plan.entry} ({plan.kind}; runner: {plan.runner})")
    ui.line(f"  record     {plan.entry}/{plan.record.folder} {' '.join(plan.record.files)}".rstrip())
    ui.line(f"  run folder {plan.run_dir} (new)")
    if plan.environment:
        ui.line(f"  env        {', '.join(f'{k}={v}' for k, v in plan.environment.items())}")
    if code := plan.code.get("path"):
        ui.line(f"  code       {plan.code.get('entry', plan.entry)}/{code} @ {plan.code.get('commit')}")
    if plan.model:
        ui.line(f"  model      {plan.model.get('entry', plan.entry)}/{plan.model.get('path')}")
    for i in plan.inputs:
        ui.line(f"  input      {i.name}: {i.files} file(s), {i.bytes:,} B from {', '.join(i.sources)} -> {i.dest}")
    if plan.docs:
        _show_docs(ui, plan.docs)
    settings = {k: v for k, v in run_settings.items() if not isinstance(v, dict | list) and len(str(v)) < 40}
    ui.line("  settings   " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    ui.line("  env vars   " + (" ".join(f"{k}={v}" for k, v in plan.env.items()) or "-"))
    ui.line(f"  command    {commands[0].split(': ', 1)[1]}")
    spans = [(cores[0], cores[-1]) for cores in pins]
    pinned = all(pinnable(cores) for cores in pins)
    where = [f"{p.name} ({' '.join(f'{k}={v}' for k, v in p.env.items())}"
             f"{', cores ' + p.cpu_cores if p.cpu_cores and pinned else ''})"
             for p in plan.processes]  # fmt: skip
    each = " (one GPU each)" if any(p.gpu is not None for p in plan.processes) else ""
    ui.line(f"  processes  {len(where)}{each}: {'; '.join(where)}")
    if not pinned:
        ui.line(f"  cores      the recipe pins cores {min(a for a, _ in spans)}-{max(b for _, b in spans)}; this "
                f"machine has {cores_here()}: not pinned")  # fmt: skip
    merged = f" (merged from {', '.join(plan.merge.values())})" if plan.merge else ""
    ui.line(f"  outputs    {', '.join(plan.outputs)}{merged}")
    ui.line("  compare    " + ", ".join(f"{c} {r}" for c, r in plan.compare.rules.items()))
    if plan.compare.settings:
        ui.line(f"  settings compared: {', '.join(plan.compare.settings)}")


def _show_docs(ui, docs: dict) -> None:
    """The recipe's documents summary (the serving benchmarks'): requests by role, GPUs, prompt lengths."""
    roles = ", ".join(f"{n} {role}" for role, n in docs.get("requests", {}).items())
    low, high = docs.get("prompt_tokens")
    ui.line(f"  docs       {docs.get('documents')} documents, requests: {roles}, on {docs.get('gpus')} GPUs; prompts "
            f"{low:,}..{high:,} tokens; clip length {docs.get('clip_length'):,}")  # fmt: skip
