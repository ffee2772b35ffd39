"""`vault restore env` on a terminal: the env list, the plans, and each env as it is restored or moved."""

from __future__ import annotations

from cloudvault.cli.ui import human_size


def show_list(ui, result) -> None:
    """--list: each env's archive, sizes, python, torch build, prefix, problems and GPU fit."""
    ui.heading(f"{result.recipe}: {len(result.envs)} env(s) in {result.entry} {result.archives}")
    for r in result.envs:
        torch = r.torch
        build = f"torch {torch['version']} (CUDA {torch['cuda'] or '?'})" if torch else "no torch"
        ui.line(
            f"  {r.name:<14} {r.archive.rsplit('/', 1)[-1]}  {human_size(r.archive_size)} "
            f"({human_size(r.size)} unpacked, {r.files} files)  python {r.python or '?'}  {build}"
        )
        ui.line(f"    prefix {r.prefix or '(not recorded)'}; {r.conda_packages} conda packages")
        if r.problem:
            ui.line(f"    ! cannot be restored: {r.problem}")
        if r.shared:
            ui.line(f"    ! {r.shared}: restore it as {r.where}")
        if r.gpu:
            fits = ", ".join(f"{cap}: {'yes' if ok else 'NO'}" for cap, ok in r.gpu.fits.items())
            ui.line(f"    gpu: {r.gpu.arches} (from {r.gpu.arches_from}); kernels for {fits}")
        for note in r.gpu.notes if r.gpu else ():
            ui.line(f"    ! {note}")
    for skipped in result.skipped:
        ui.line(f"  skipped {skipped}")


def show_plans(ui, result) -> None:
    """--dry-run: each env's plan (a move's, with --move)."""
    from cloudvault.restore.env.results import MovePlan

    for p in result.plan:
        if isinstance(p, MovePlan):
            _show_move_plan(ui, p)
            continue
        ui.heading(f"{p.name}: {p.archive} -> {p.target}")
        ui.line(
            f"  {human_size(p.archive_size)} archive, {p.files} files, about {human_size(p.bytes)} "
            f"to write; {human_size(p.free)} free there{'' if p.enough_space else ' (NOT ENOUGH)'}"
        )
        if p.relocate:
            ui.line(
                f"  relocate from {p.old_prefix}: {p.conda_text_with_prefix} text and "
                f"{p.conda_binary_with_prefix} binary files recorded by conda-meta with the prefix; "
                f"{p.pip_scripts} pip scripts and {p.pip_pyc} pip byte-code files checked while restoring"
            )
        else:
            ui.line("  at the original prefix: files written verbatim, nothing rewritten")
        ui.line(f"  smoke checks: prefix{''.join(', ' + c for c in p.checks)}")
        for risk in p.risks:
            ui.line(f"  ! {risk}")


def _show_move_plan(ui, p) -> None:
    ui.heading(f"{p.name}: move {p.moved_from} -> {p.target}")
    enough = "" if p.enough_space else " (NOT ENOUGH)"
    ui.line(f"  about {human_size(p.bytes)} to copy; {human_size(p.free)} free there{enough}")
    ui.line(f"  relocate from {p.old_prefix} (its marker); then {p.moved_from} is removed")
    ui.line(f"  smoke checks: prefix{''.join(', ' + c for c in p.checks)}")
    for risk in p.risks:
        ui.line(f"  ! {risk}")


def show_one(ui, r) -> None:
    """One env as its restore (or move) ends: what was written, verified, moved; checks, GPU notes, pitfalls."""
    from cloudvault.restore.env.results import AlreadyRestored, EnvMoved

    if isinstance(r, AlreadyRestored):
        ui.line(f"{r.name}: already restored at {r.target} from this archive; nothing to do")
        return
    if isinstance(r, EnvMoved):
        ui.heading(f"{r.name}: moved from {r.moved_from} to {r.target}")
        ui.line(
            f"  {r.rewritten} files rewritten from {r.old_prefix}; byte-code: {r.pyc_removed} removed, "
            f"{r.pyc_recompiled} compiled again"
        )
    else:
        _show_restored(ui, r)
    if r.pyc_note:
        ui.warn(f"{r.name}: {r.pyc_note}")
    for u in r.unpatched:
        ui.warn(f"{r.name}: not moved: {u['path']}: {u['why']}")
    for c in r.checks:
        ui.line(
            f"  check {c.name}: {'ok' if c.ok else 'FAILED'} ({c.command})" + ("" if c.ok else f": {c.output[-200:]}")
        )
    for note in r.gpu.notes if r.gpu else ():
        ui.warn(f"{r.name}: {note}")
    for pitfall in r.pitfalls:
        ui.line(f"  note: {pitfall}")


def _show_restored(ui, r) -> None:
    v = r.verified
    ui.heading(f"{r.name}: restored at {r.target}")
    ui.line(
        f"  {r.files} files ({human_size(r.bytes)}), {r.links} links; verified: {v.blake3_files} "
        f"BLAKE3, {v.conda_checked} conda-meta sha256, {v.record_checked} pip RECORD sha256"
    )
    if r.python:
        py = r.python
        was = f" (was {py.replaced})" if py.replaced else ""
        on = f"on {py.base}{was}" if py.base else "on the interpreter inside it"
        ui.line(f"  venv {on}, Python {py.version or '(version not recorded)'}")
    for what, differ in (("differ from conda-meta", v.conda_differ), ("differ from pip RECORD", v.record_differ)):
        if differ:
            ui.warn(f"{r.name}: {len(differ)} file(s) {what} (changed after install): {', '.join(differ[:5])}")
    if r.old_prefix != r.target:
        how = ", ".join(f"{n} {h}" for h, n in sorted(r.rewritten_how.items())) or "none"
        ui.line(
            f"  moved from {r.old_prefix}: {r.rewritten} files rewritten ({how}); byte-code: "
            f"{r.pyc_removed} removed, {r.pyc_recompiled} compiled again"
        )
