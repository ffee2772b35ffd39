"""Restore the lab's Python envs from the mirror's env archives: at their recorded prefix, or relocated.

RECIPE names where the archives are (nebius: 015 data/miniforge3_tar/*.tar.zst packed at
/mnt/filesystem-h8/miniforge3; runpod: 017 data/workspace/cs/backup/env-*.tar.zst packed at /workspace/env);
every env folder of the archives it finds (conda-meta/ or pyvenv.cfg) is an env, named by its folder (envs/NAME;
`base` for a conda root holding envs/*). With no ENV, all of them. Venvs keep their interpreter links; a missing
base python is exit 6 unless --python names one of the same major.minor (docs/envs.md).

  vault restore env nebius --list                                   envs, sizes, python, torch, CUDA build
  vault restore env nebius --dry-run                                the plan, reading only conda-meta
  vault restore env nebius specdec --prefix ~/envs/specdec          one env, relocated
  vault restore env nebius --to ~/miniforge3                        every env under ROOT/envs/NAME
  vault restore env nebius specdec --move ~/envs/specdec --prefix ~/moved/specdec   move a restored env again

Each archive is streamed once, every file verified (catalog BLAKE3, conda-meta sha256, pip RECORD) into a
staging folder beside the target that is renamed into place at the end: Ctrl-C or kill leaves nothing at the
target. Relocating rewrites text holding the old prefix (long #! lines become conda's /bin/sh trampoline),
patches binaries NUL-padded within conda's placeholder length, makes ELF run paths $ORIGIN-relative and compiles
byte-code again with the env's python. The recipe's smoke checks then run inside the env; each restore is
recorded in the catalog (`vault search restored`, `vault show 015`). Every target is checked before the first
write: never /, in or around a mirror, outside --to ROOT, or over other envs. Exit 2: target exists (--force),
refused target, bad recipe, or a file the new prefix does not fit (--allow-unpatched); 3: unknown env; 4: a name
two envs share; 5: damaged archive, unsafe member or env name; 6: no space, prefix not creatable, or a smoke
check failed.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, opened_catalog


def add_arguments(parser) -> None:
    parser.add_argument("recipe", help="env recipe: nebius, runpod, your own name under $VAULT_RECIPES/env, or a .toml")
    parser.add_argument("envs", nargs="*", metavar="ENV",
                        help="env names (default: every env the recipe finds); ARCHIVE:FOLDER names one of several "
                        "envs of one name")  # fmt: skip
    parser.add_argument("--list", action="store_true", help="list the envs with sizes, python, torch and CUDA build")
    parser.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--prefix", help="restore one env at this prefix")
    where.add_argument("--to", metavar="ROOT", help="restore under ROOT, keeping each env's folder (ROOT/envs/NAME)")
    parser.add_argument("--force", action="store_true", help="replace an existing target (swapped at the end)")
    parser.add_argument(
        "--allow-unpatched",
        action="store_true",
        help="place the env even when some file cannot hold the new prefix (they are listed)",
    )
    parser.add_argument(
        "--move",
        metavar="FROM",
        help="move an env vault restored at FROM to --prefix/--to (relocated again), then remove FROM",
    )
    parser.add_argument("--python", metavar="PATH", help="run a venv on this python (same major.minor as its own)")
    parser.add_argument("--no-checks", action="store_true", help="skip the recipe's smoke checks")
    add_output_options(parser)


def run(args) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.restore.env.source import EnvRecipe, local_caps

    for option in ("prefix", "to", "move", "python"):
        if getattr(args, option) is not None and not getattr(args, option).strip():
            raise errors.UsageError(detail=f"--{option} needs a path")
    recipe = EnvRecipe(args.recipe)
    ui = UI(as_json=args.json)
    with opened_catalog(args, readonly=args.list or args.dry_run) as conn:
        envs = recipe.pick(recipe.discover(conn), args.envs)
        if not envs:
            raise errors.NotFound(
                detail=f"recipe {recipe.name} finds no env archive matching "
                f"{recipe.data['archives']!r} in entry {recipe.data['entry']}"
            )
        if args.list:
            return _list(ui, recipe, conn, envs, local_caps())
        placed = _placements(conn, envs, args)
        if args.dry_run:
            return _dry_run(ui, recipe, conn, placed, args, local_caps())
        return _restore(ui, recipe, conn, placed, args)


def _placements(conn, envs, args) -> list:
    """(target, env) for each env, every target (and a move's source) checked before anything is written."""
    from pathlib import Path

    from cloudvault.restore.env.targets import placements, refuse_unsafe

    for env in envs:
        refuse_unsafe(env)
    if args.move and (len(envs) != 1 or not (args.prefix or args.to)):
        raise errors.UsageError(detail="--move FROM moves one named env: give ENV and --prefix or --to")
    if args.prefix and len(envs) != 1:
        raise errors.UsageError(detail=f"--prefix places one env; name it (one of: {', '.join(e.name for e in envs)})")
    moving = Path(args.move).expanduser().absolute() if args.move else None
    return placements(conn, envs, args.prefix, args.to, args.force, moving)


def _list(ui, recipe, conn, envs, caps) -> int:
    from cloudvault.cli.ui import human_size
    from cloudvault.restore.env.source import describe

    rows = [describe(conn, env, caps) for env in envs]
    if ui.as_json:
        ui.emit({"recipe": recipe.name, "entry": recipe.data["entry"], "envs": rows, "skipped": recipe.skipped})
        return errors.OK
    ui.heading(f"{recipe.name}: {len(rows)} env(s) in {recipe.data['entry']} {recipe.data['archives']}")
    for r in rows:
        torch = r["torch"]
        build = f"torch {torch['version']} (CUDA {torch['cuda'] or '?'})" if torch else "no torch"
        ui.line(
            f"  {r['name']:<14} {r['archive'].rsplit('/', 1)[-1]}  {human_size(r['archive_size'])} "
            f"({human_size(r['size'])} unpacked, {r['files']} files)  python {r['python'] or '?'}  {build}"
        )
        ui.line(f"    prefix {r['prefix'] or '(not recorded)'}; {r['conda_packages']} conda packages")
        if r["problem"]:
            ui.line(f"    ! cannot be restored: {r['problem']}")
        if r["shared"]:
            ui.line(f"    ! {r['shared']}: restore it as {r['where']}")
        if r["gpu"]:
            fits = ", ".join(f"{cap}: {'yes' if ok else 'NO'}" for cap, ok in r["gpu"]["fits"].items())
            ui.line(f"    gpu: {r['gpu']['arches']} (from {r['gpu']['arches_from']}); kernels for {fits}")
        for note in (r["gpu"] or {}).get("notes", []):
            ui.line(f"    ! {note}")
    for skipped in recipe.skipped:
        ui.line(f"  skipped {skipped}")
    return errors.OK


def _dry_run(ui, recipe, conn, placed, args, caps) -> int:
    from cloudvault.cli.ui import human_size
    from cloudvault.restore.env.restore import plan

    if args.move:
        return _dry_run_move(ui, recipe, *placed[0], args)
    plans = [plan(conn, recipe, env, target, caps) for target, env in placed]
    if ui.as_json:
        ui.emit({"recipe": recipe.name, "plan": plans})
        return errors.OK
    for p in plans:
        ui.heading(f"{p['name']}: {p['archive']} -> {p['target']}")
        ui.line(
            f"  {human_size(p['archive_size'])} archive, {p['files']} files, about {human_size(p['bytes'])} "
            f"to write; {human_size(p['free'])} free there{'' if p['enough_space'] else ' (NOT ENOUGH)'}"
        )
        if p["relocate"]:
            ui.line(
                f"  relocate from {p['old_prefix']}: {p['conda_text_with_prefix']} text and "
                f"{p['conda_binary_with_prefix']} binary files recorded by conda-meta with the prefix; "
                f"{p['pip_scripts']} pip scripts and {p['pip_pyc']} pip byte-code files checked while restoring"
            )
        else:
            ui.line("  at the original prefix: files written verbatim, nothing rewritten")
        ui.line(f"  smoke checks: prefix{''.join(', ' + c for c in p['checks'])}")
        for risk in p["risks"]:
            ui.line(f"  ! {risk}")
    return errors.OK


def _dry_run_move(ui, recipe, target, env, args) -> int:
    from pathlib import Path

    from cloudvault.cli.ui import human_size
    from cloudvault.restore.env.move import plan_move

    p = plan_move(recipe, env, Path(args.move).expanduser().absolute(), target)
    if ui.as_json:
        ui.emit({"recipe": recipe.name, "plan": [p]})
        return errors.OK
    ui.heading(f"{p['name']}: move {p['moved_from']} -> {p['target']}")
    enough = "" if p["enough_space"] else " (NOT ENOUGH)"
    ui.line(f"  about {human_size(p['bytes'])} to copy; {human_size(p['free'])} free there{enough}")
    ui.line(f"  relocate from {p['old_prefix']} (its marker); then {p['moved_from']} is removed")
    ui.line(f"  smoke checks: prefix{''.join(', ' + c for c in p['checks'])}")
    for risk in p["risks"]:
        ui.line(f"  ! {risk}")
    return errors.OK


def _restore(ui, recipe, conn, placed, args) -> int:
    from pathlib import Path

    from cloudvault.restore.env.move import move
    from cloudvault.restore.env.restore import Choices, restore
    from cloudvault.restore.env.source import ChecksFailed

    choices = Choices(force=args.force, allow_unpatched=args.allow_unpatched, smoke=not args.no_checks,
                      python=args.python)  # fmt: skip
    results = []
    for target, env in placed:  # shallowest first: a conda root is placed before the envs inside it
        progress = ui.progress(f"restoring {env.name}")
        if args.move:
            result = move(conn, recipe, env, Path(args.move).expanduser().absolute(), target, choices)
        else:
            result = restore(conn, recipe, env, target, choices, progress=progress)
        results.append(result)
        _say(ui, result)
    if ui.as_json:
        ui.emit({"recipe": recipe.name, "restored": results})
    failed = [f"{r['name']}: {c['name']}" for r in results for c in r.get("checks", []) if not c["ok"]]
    if failed:
        raise ChecksFailed(
            name=", ".join(r["name"] for r in results),
            prefix=", ".join(r["target"] for r in results),
            failed="; ".join(failed),
        )
    return errors.OK


def _say(ui, r: dict) -> None:
    if r["status"] == "already restored":
        ui.line(f"{r['name']}: already restored at {r['target']} from this archive; nothing to do")
        return
    if "moved_from" in r:
        ui.heading(f"{r['name']}: moved from {r['moved_from']} to {r['target']}")
        ui.line(
            f"  {r['rewritten']} files rewritten from {r['old_prefix']}; byte-code: {r['pyc_removed']} removed, "
            f"{r['pyc_recompiled']} compiled again"
        )
    else:
        _say_restored(ui, r)
    if r["pyc_note"]:
        ui.warn(f"{r['name']}: {r['pyc_note']}")
    for u in r["unpatched"]:
        ui.warn(f"{r['name']}: not moved: {u['path']}: {u['why']}")
    for c in r["checks"]:
        ui.line(
            f"  check {c['name']}: {'ok' if c['ok'] else 'FAILED'} ({c['command']})"
            + ("" if c["ok"] else f": {c['output'][-200:]}")
        )
    for note in (r["gpu"] or {}).get("notes", []):
        ui.warn(f"{r['name']}: {note}")
    for pitfall in r["pitfalls"]:
        ui.line(f"  note: {pitfall}")


def _say_restored(ui, r: dict) -> None:
    from cloudvault.cli.ui import human_size

    v = r["verified"]
    ui.heading(f"{r['name']}: restored at {r['target']}")
    ui.line(
        f"  {r['files']} files ({human_size(r['bytes'])}), {r['links']} links; verified: {v['blake3_files']} "
        f"BLAKE3, {v['conda_checked']} conda-meta sha256, {v['record_checked']} pip RECORD sha256"
    )
    if r.get("python"):
        py = r["python"]
        was = f" (was {py['replaced']})" if py["replaced"] else ""
        on = f"on {py['base']}{was}" if py["base"] else "on the interpreter inside it"
        ui.line(f"  venv {on}, Python {py['version'] or '(version not recorded)'}")
    for what, key in (("differ from conda-meta", "conda_differ"), ("differ from pip RECORD", "record_differ")):
        if v[key]:
            ui.warn(f"{r['name']}: {len(v[key])} file(s) {what} (changed after install): {', '.join(v[key][:5])}")
    if r["old_prefix"] != r["target"]:
        how = ", ".join(f"{n} {h}" for h, n in sorted(r["rewritten_how"].items())) or "none"
        ui.line(
            f"  moved from {r['old_prefix']}: {r['rewritten']} files rewritten ({how}); byte-code: "
            f"{r['pyc_removed']} removed, {r['pyc_recompiled']} compiled again"
        )
