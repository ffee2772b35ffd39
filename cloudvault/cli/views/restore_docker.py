"""`vault restore docker` on a terminal: the image recipes, the checks before a load, and the image restored."""

from __future__ import annotations

from cloudvault.cli.ui import human_size


def show_list(ui, result) -> None:
    """--list: each recipe's archive, size, tags, config digest, CUDA and arch list, registry and problems."""
    ui.heading(f"docker images ({len(result.images)} recipes)")
    for r in result.images:
        ui.line(f"  {r.name:<11} {r.archive}  {human_size(r.size)}  {', '.join(r.tags)}")
        ui.line(f"  {'':<11} config {(r.config_digest or '-')[:19]}  CUDA {r.cuda_version or '-'}  "
                f"arch {r.arch_list or '-'} ({r.arch_source})")  # fmt: skip
        pull = f"{r.registry}@{r.manifest_digest[:19]}" if r.manifest_digest else "no digest recorded"
        ui.line(f"  {'':<11} registry {r.registry or '-'} ({pull})")
        if r.problem:
            ui.line(f"  {'':<11} ! {r.problem}")
        if r.unread:
            ui.line(f"  {'':<11} config not read: {r.unread}")


def show_checked(ui, c) -> None:
    """--dry-run / --check-gpu: the archive, its sums, the GPU, kernels, daemon and tags, then the verdict (none
    when a check failed: the command ends on its error)."""
    ui.heading(f"{c.name}  (recipe {c.recipe_path})")
    if c.archive is not None:
        ui.line(f"  archive  {c.archive}  {human_size(c.size)} compressed, {human_size(c.raw_size)} raw")
        if c.archive_config:
            ui.line(f"  config   {c.archive_config}  CUDA {c.cuda_version or '-'}")
    if c.sha256:
        ui.line(f"  sha256   {c.sha256[:16]}... from {c.sums}, checked as it streams")
    if c.ref:
        ui.line(f"  pull     {c.ref}")
    ui.line(f"  gpu      {gpu_line(c.gpu)}")
    for path, archs in (c.kernels or {}).items():
        ui.line(f"  kernels  {path}: {' '.join(archs)}")
    if c.kernels == {}:
        ui.line("  kernels  no library with device code found")
    if c.daemon is not None:
        d = c.daemon
        space = f"{human_size(d.free)} free" if d.free is not None else "free space unknown"
        ui.line(f"  daemon   {d.host}, docker {d.version}, data root {d.root}: {space}, needs {human_size(d.need)}")
        for tag, holder in c.tags.items():
            ui.line(f"  tag      {tag}: {'free' if holder is None else 'held by ' + holder[:19]}")
    for note in c.notes:
        ui.line(f"  note     {note}")
    if c.failure is None:
        verb = "pull" if c.ref else "load"
        ui.line("the GPU check passes" if c.gpu_only else f"would {verb} {c.name}: every check passes")


def show_restored(ui, result) -> None:
    """The image loaded (or pulled): its id, what was proven, its tags, the GPU fit, the rate."""
    done = result.restored
    ui.line(f"{done.name}: {'loaded' if done.source == 'archive' else 'pulled'} {done.image_id}")
    if done.sha256:
        ui.line(f"  sha256   {done.sha256[:16]}... matches SHA256SUMS; {done.layers} layers match their diff_ids")
    else:
        ui.line(f"  digest   {done.manifest_digest}: config {done.config_digest[:19]} is the archive's")
    ui.line(f"  tags     {', '.join(done.tags) or '-'}")
    for moved in done.moved_tags:
        ui.line(f"  note     {moved}")
    ui.line(f"  gpu      {gpu_line(done.gpu)}")
    rate = f", {human_size(int(done.bytes_out / done.seconds))}/s" if done.seconds and done.bytes_out else ""
    size = f" ({human_size(done.bytes_in)} compressed, {human_size(done.bytes_out)} streamed{rate})"
    ui.line(f"restored {done.name} in {done.seconds:.1f} s{size if done.bytes_in else ''}; recorded in the catalog")


def gpu_line(fit) -> str:
    """The GPU check in one line: the GPUs and the verdict, and what the image was built for."""
    built = f"built for {fit.archs or 'an unknown arch list'} ({fit.source})"
    if fit.verdict == "no_gpu":
        return f"no NVIDIA GPU here (nvidia-smi found none): not checked; {built}"
    if fit.verdict == "unknown":
        return f"{len(fit.gpus)} GPU(s), but the image's arch list is {fit.source}: cannot tell"
    gpus = ", ".join(f"GPU {g.index} {g.name} ({g.cap_text}, {g.sm})" for g in fit.gpus)
    return f"{gpus}: {'fits' if fit.verdict == 'fits' else 'CANNOT RUN it'}; {built}"
