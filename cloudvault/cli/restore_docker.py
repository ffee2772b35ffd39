"""Load the mirror's docker images back into dockerd, verified: `vault restore docker tandemspec`.

NAME is a recipe in recipes/docker/ (tandemspec, neo, headinfer) or $VAULT_RECIPES/docker/, or a path to one.
From the archive (default), `images/NAME.tar.zst` is decompressed and streamed into the daemon with no copy on
disk; its sha256 is checked against SHA256SUMS, every blob against its digest and every layer against the
config's diff_ids as it passes, and the stream's tail is held back until all of that matched, so a damaged
archive loads nothing (exit 5). `--from registry` pulls repository@digest with your own docker login and proves
it is the archive's image (same config digest). Before any byte is loaded: the image's CUDA arch list against
this machine's GPU (exit 6 naming both when it cannot run), the daemon (DOCKER_HOST), free space in its data
root, and tags held by other images (exit 6 unless --retag). Every restore is recorded in the catalog.

  vault restore docker --list                   the images: archive, size, tags, config digest, CUDA, arch list
  vault restore docker tandemspec --check-gpu   only the GPU check (no daemon needed)
  vault restore docker neo --check-gpu --scan-kernels   each CUDA library's kernels (needs: cuobjdump)
  vault restore docker tandemspec --dry-run     every check, nothing loaded (needs: a docker daemon)
  vault restore docker neo --from registry --digest sha256:...   (needs: a registry and your `docker login`)
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, opened_catalog


def add_arguments(parser) -> None:
    parser.add_argument("name", nargs="?", help="image recipe: tandemspec, neo, headinfer, or a .toml path")
    parser.add_argument("--list", action="store_true", help="list the image recipes and what their archives hold")
    parser.add_argument("--from", dest="source", choices=("archive", "registry"), default="archive",
                        help="load the mirror's archive (default), or pull repository@digest")  # fmt: skip
    parser.add_argument("--digest", help="registry manifest digest to pull (when the recipe records none)")
    parser.add_argument("--dry-run", action="store_true", help="run every check, load nothing")
    parser.add_argument("--check-gpu", action="store_true", help="only check the image's arch list against the GPU")
    parser.add_argument("--require-gpu", action="store_true", help="fail (exit 6) when this machine has no GPU")
    parser.add_argument("--ignore-gpu", action="store_true", help="load even if the GPU cannot run the image")
    parser.add_argument("--scan-kernels", action="store_true",
                        help="also list every CUDA library's device code (cuobjdump; reads all layers)")  # fmt: skip
    parser.add_argument("--retag", action="store_true", help="move tags that other images hold to this one")
    parser.add_argument("--timeout", type=float, help="seconds to wait on the daemon (default: sized to the image)")
    add_output_options(parser, quiet=True)


def run(args) -> int:
    from cloudvault.cli.ui import UI

    ui = UI(as_json=args.json, quiet=args.quiet)
    if args.list:
        return _list(args, ui)
    if not args.name:
        raise errors.UsageError(detail="name an image to restore (see `vault restore docker --list`)")
    from cloudvault.restore.docker.restore import Choices, preflight, restore
    from cloudvault.restore.docker.source import load_docker_recipe

    recipe = load_docker_recipe(args.name)
    checking = args.dry_run or args.check_gpu
    with _catalog(args, optional=args.check_gpu) as conn:
        choices = Choices(recipe, args.source, require_gpu=args.require_gpu, ignore_gpu=args.ignore_gpu,
                          retag=args.retag)  # fmt: skip
        plan = preflight(conn, choices, digest=args.digest, gpu_only=args.check_gpu, scan=args.scan_kernels)
        if checking:
            return _show_plan(ui, plan, args.check_gpu)
        for note in plan.notes:
            ui.warn(note)
        progress = ui.progress("pulling" if args.source == "registry" else "loading")
        done = restore(conn, plan, timeout=args.timeout, progress=progress)
    if ui.as_json:
        ui.emit({"restored": done.to_json(), "gpu": done.gpu.to_json()})
        return errors.OK
    _show_restored(ui, plan, done)
    return errors.OK


def _catalog(args, *, optional: bool):
    """The catalog, read-only for a check; with optional, None when there is none (a GPU check, a listing)."""
    return opened_catalog(args, readonly=args.dry_run or args.check_gpu, optional=optional)


def _list(args, ui) -> int:
    from cloudvault.cli.ui import human_size
    from cloudvault.restore.docker.source import load_docker_recipe, recipe_names

    with _catalog(args, optional=True) as conn:
        names = [args.name] if args.name else recipe_names()
        rows = [_list_row(conn, load_docker_recipe(name)) for name in names]
    if ui.as_json:
        ui.emit({"images": rows})
        return errors.OK
    ui.heading(f"docker images ({len(rows)} recipes)")
    for r in rows:
        ui.line(f"  {r['name']:<11} {r['archive']}  {human_size(r['size'])}  {', '.join(r['tags'])}")
        ui.line(f"  {'':<11} config {(r['config_digest'] or '-')[:19]}  CUDA {r['cuda_version'] or '-'}  "
                f"arch {r['arch_list'] or '-'} ({r['arch_source']})")  # fmt: skip
        pull = f"{r['registry']}@{r['manifest_digest'][:19]}" if r["manifest_digest"] else "no digest recorded"
        ui.line(f"  {'':<11} registry {r['registry'] or '-'} ({pull})")
        if r["problem"]:
            ui.line(f"  {'':<11} ! {r['problem']}")
        if r["unread"]:
            ui.line(f"  {'':<11} config not read: {r['unread']}")
    return errors.OK


def _list_row(conn, recipe) -> dict:
    """What --list shows of one image recipe: its archive as the catalog (when there is one) records it."""
    from cloudvault.restore.docker.fit import arch_source
    from cloudvault.restore.docker.restore import READ_BUDGET
    from cloudvault.restore.docker.source import archive_info

    info, problem = None, None
    if conn is not None:
        try:
            info = archive_info(conn, recipe, budget=READ_BUDGET)
        except errors.VaultError as exc:
            problem = str(exc)
    config = info.config if info else None
    arch, where = arch_source(recipe, config)
    return {
        "name": recipe.name, "archive": f"{recipe.entry}/{recipe.archive}",
        "size": info.file.size if info else None, "raw_size": info.raw_size if info else None,
        "tags": list(dict.fromkeys([*(info.repo_tags if info else ()), *recipe.tags])),
        "config_digest": config.digest if config else recipe.config_digest,
        "cuda_version": (config.cuda_version if config else None) or recipe.cuda_version,
        "arch_list": arch, "arch_source": where, "registry": recipe.repository,
        "manifest_digest": recipe.manifest_digest, "problem": problem or (info.problem if info else None),
        "unread": info.unread if info else None,
    }  # fmt: skip


def _gpu_line(fit) -> str:
    built = f"built for {fit.archs or 'an unknown arch list'} ({fit.source})"
    if fit.verdict == "no_gpu":
        return f"no NVIDIA GPU here (nvidia-smi found none): not checked; {built}"
    if fit.verdict == "unknown":
        return f"{len(fit.gpus)} GPU(s), but the image's arch list is {fit.source}: cannot tell"
    gpus = ", ".join(f"GPU {g.index} {g.name} ({g.cap_text}, {g.sm})" for g in fit.gpus)
    return f"{gpus}: {'fits' if fit.verdict == 'fits' else 'CANNOT RUN it'}; {built}"


def _show_plan(ui, plan, gpu_only: bool) -> int:
    from cloudvault.cli.ui import human_size

    problem = plan.problems[0] if plan.problems else None
    if ui.as_json:
        ui.emit(_plan_json(plan) | ({"error": str(problem), "exit_code": problem.exit_code} if problem else {}))
        return problem.exit_code if problem else errors.OK
    r, a = plan.recipe, plan.archive
    ui.heading(f"{r.name}  (recipe {r.path})")
    if a is not None:
        ui.line(f"  archive  {a.mirror_path}  {human_size(a.file.size)} compressed, {human_size(a.raw_size)} raw")
        if a.config:
            ui.line(f"  config   {a.config.digest}  CUDA {a.config.cuda_version or r.cuda_version or '-'}")
    if plan.sha256:
        ui.line(f"  sha256   {plan.sha256[:16]}... from {a.entry_id}/{r.sha256sums}, checked as it streams")
    if plan.ref:
        ui.line(f"  pull     {plan.ref}")
    ui.line(f"  gpu      {_gpu_line(plan.gpu)}")
    for lib in plan.kernels or ():
        ui.line(f"  kernels  {lib.path}: {' '.join(str(a) for a in lib.archs)}")
    if plan.kernels == []:
        ui.line("  kernels  no library with device code found")
    if plan.daemon is not None:
        d = plan.daemon
        space = f"{human_size(plan.free)} free" if plan.free is not None else "free space unknown"
        need = human_size(plan.need)
        ui.line(f"  daemon   {d.host}, docker {d.version}, data root {d.root_dir}: {space}, needs {need}")
        for tag, holder in plan.holders.items():
            ui.line(f"  tag      {tag}: {'free' if holder is None else 'held by ' + holder[:19]}")
    for note in plan.notes:
        ui.line(f"  note     {note}")
    if problem:
        raise problem
    verb = "pull" if plan.ref else "load"
    ui.line("the GPU check passes" if gpu_only else f"would {verb} {r.name}: every check passes")
    return errors.OK


def _plan_json(plan) -> dict:
    a = plan.archive
    return {
        "name": plan.recipe.name, "source": plan.source, "ref": plan.ref, "sha256": plan.sha256,
        "archive": a.mirror_path if a else None, "size": a.file.size if a else None,
        "config_digest": plan.expected_config, "gpu": plan.gpu.to_json(),
        "daemon": {"host": plan.daemon.host, "version": plan.daemon.version, "root": plan.daemon.root_dir,
                   "free": plan.free, "need": plan.need} if plan.daemon else None,
        "tags": plan.holders, "notes": plan.notes, "problems": [str(p) for p in plan.problems],
        "kernels": None if plan.kernels is None else {k.path: [str(a) for a in k.archs] for k in plan.kernels},
    }  # fmt: skip


def _show_restored(ui, plan, done) -> None:
    from cloudvault.cli.ui import human_size

    ui.line(f"{done.name}: {'loaded' if done.source == 'archive' else 'pulled'} {done.image_id}")
    if done.sha256:
        ui.line(f"  sha256   {done.sha256[:16]}... matches SHA256SUMS; {done.layers} layers match their diff_ids")
    else:
        ui.line(f"  digest   {done.manifest_digest}: config {done.config_digest[:19]} is the archive's")
    ui.line(f"  tags     {', '.join(done.tags) or '-'}")
    for moved in done.moved_tags:
        ui.line(f"  note     {moved}")
    ui.line(f"  gpu      {_gpu_line(done.gpu)}")
    rate = f", {human_size(int(done.bytes_out / done.seconds))}/s" if done.seconds and done.bytes_out else ""
    size = f" ({human_size(done.bytes_in)} compressed, {human_size(done.bytes_out)} streamed{rate})"
    ui.line(f"restored {done.name} in {done.seconds:.1f} s{size if done.bytes_in else ''}; recorded in the catalog")
