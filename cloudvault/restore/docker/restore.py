"""`vault restore docker`: the mirror's docker images back into a daemon, verified, from archive or registry.

A recipe (`recipes/docker/NAME.toml`) names the image's archive in the mirror, its SHA256SUMS, the tags it
should hold and its registry repository. Before any byte is loaded, `preflight` looks at everything that can
stop a restore (the GPU against the image's CUDA arch list, the daemon, the free space in its data root, tags
held by other images) from the catalog and the archive's two small members (manifest.json and the image config).
`restore` then streams the archive into the daemon (see stream.py) or pulls repo@digest, proves the image
is the archive's, applies the tags, and records the restore in the catalog.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from dataclasses import dataclass, field

from cloudvault.catalog.records import now, record_restore
from cloudvault.errors import INTERRUPTED, IntegrityError, NotFound, UsageError, VaultError
from cloudvault.restore.docker.errors import DaemonNoSpace, ImageMismatch, KernelMismatch, TagConflict
from cloudvault.restore.docker.fit import arch_source, gpu_problem
from cloudvault.restore.docker.oci import ImageConfig
from cloudvault.restore.docker.results import ImageRestored
from cloudvault.restore.docker.source import DIGEST, KIND, ArchiveInfo, DockerRecipe, archive_info, expected_sha256
from cloudvault.tools import docker as dd
from cloudvault.tools import gpu

LOAD_FACTOR = 2  # docker load unpacks the tar in its data root, then the layers: about twice the raw size
READ_BUDGET = 256 << 20  # decoded bytes worth spending to read manifest.json and the config before a load


# -- preflight: everything that can stop a restore, before any byte is loaded --------------------------------------
@dataclass(frozen=True)
class Choices:
    """What is known before anything is looked at: the recipe and the user's choices."""

    recipe: DockerRecipe
    source: str  # archive | registry
    require_gpu: bool = False
    ignore_gpu: bool = False
    retag: bool = False


@dataclass
class Plan:
    """What preflight found: what a restore would do and what stands in its way (problems: the errors it would end
    in, in order). Filled by preflight alone; the restore reads it and keeps what it finds while streaming in a
    Loading of its own."""

    choices: Choices
    archive: ArchiveInfo | None = None
    sha256: str | None = None
    ref: str | None = None  # repository@digest for a registry pull
    expected_config: str | None = None
    gpu: gpu.GpuFit | None = None
    daemon: dd.Daemon | None = None
    free: int | None = None
    need: int | None = None
    holders: dict[str, str | None] = field(default_factory=dict)
    moves: dict[str, str] = field(default_factory=dict)  # tag -> the image --retag takes it from
    problems: list[VaultError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    kernels: list | None = None  # LibraryKernels found by --scan-kernels

    @property
    def recipe(self) -> DockerRecipe:
        return self.choices.recipe

    @property
    def source(self) -> str:
        return self.choices.source

    @property
    def tags(self) -> tuple[str, ...]:
        archive_tags = self.archive.repo_tags if self.archive and self.source == "archive" else ()
        return tuple(dict.fromkeys([*archive_tags, *self.recipe.tags]))


def preflight(conn: sqlite3.Connection | None, choices: Choices, *, digest: str | None = None, gpu_only: bool = False,
              scan: bool = False) -> Plan:  # fmt: skip
    """GPU fit first (from the catalog alone), then the daemon, its free space and the tags: the Plan found."""
    plan = Plan(choices)
    recipe = plan.recipe
    if conn is not None:
        _source_checks(conn, plan, digest, scan)
    else:
        plan.notes.append("no catalog: the arch list comes from the recipe")
    config = plan.archive.config if plan.archive else None
    arch_list, where = arch_source(recipe, config)
    plan.gpu = gpu.check_fit(arch_list, where, gpu.local_gpus())
    problem = gpu_problem(recipe.name, plan.gpu, require_gpu=choices.require_gpu, ignore_gpu=choices.ignore_gpu)
    if problem:
        plan.problems.append(problem)
    if scan and plan.archive is not None:
        _kernel_checks(conn, plan)
    if gpu_only:
        return plan
    try:
        plan.daemon = dd.connect(timeout=10)
    except VaultError as exc:
        plan.problems.append(exc)
        return plan
    _space_check(plan)
    _tag_check(plan)
    return plan


def _source_checks(conn: sqlite3.Connection, plan: Plan, digest: str | None, scan: bool = False) -> None:
    """The archive in the catalog and its SHA256SUMS line; for a registry pull, the reference and the config
    digest the pulled image must have."""
    recipe = plan.recipe
    try:
        reads_all = plan.source == "registry" or scan
        plan.archive = archive_info(conn, recipe, budget=None if reads_all else READ_BUDGET)
        if plan.archive.unread:
            plan.notes.append(f"config: {plan.archive.unread}")
    except NotFound as exc:
        if plan.source == "archive":
            plan.problems.append(exc)
        else:
            plan.notes.append(f"archive: {exc}")
    if plan.archive and plan.archive.problem:
        plan.problems.append(IntegrityError(detail=f"{plan.archive.mirror_path}: {plan.archive.problem}"))
    found = plan.archive.config.digest if plan.archive and plan.archive.config else None
    if found and (mismatch := config_mismatch(recipe, found, plan.archive.mirror_path)):
        plan.problems.append(mismatch)
    plan.expected_config = recipe.config_digest or found
    if plan.source == "archive" and plan.archive and not plan.problems:
        try:
            plan.sha256 = expected_sha256(conn, recipe, plan.archive)
        except VaultError as exc:
            plan.problems.append(exc)
    if plan.source == "registry":
        _registry_ref(plan, digest)


def _kernel_checks(conn: sqlite3.Connection, plan: Plan) -> None:
    """--scan-kernels: every CUDA library against every GPU; with no GPU, against the targets the image claims."""
    from cloudvault.restore.docker.kernels import misfits, scan_kernels

    plan.kernels = scan_kernels(conn, plan.archive.layers)
    for g in plan.gpu.gpus:
        bad = misfits(plan.kernels, g.compute_cap)
        if bad and not plan.choices.ignore_gpu:
            names = ", ".join(f"{lib.path} ({gpu.describe(lib.archs)})" for lib in bad[:5])
            plan.problems.append(KernelMismatch(count=len(bad), name=plan.recipe.name, gpu=f"GPU {g.index} ({g.name})",
                                                cap=g.cap_text, sm=g.sm, libraries=names))  # fmt: skip
            return
    claimed = {a.cap for a in _claimed_archs(plan) if not a.ptx}
    for cap in sorted(claimed):
        for lib in misfits(plan.kernels, cap):
            plan.notes.append(f"{lib.path} holds {gpu.describe(lib.archs)} only: no kernels for "
                              f"sm_{cap[0]}{cap[1]}, which the image says it was built for")  # fmt: skip


def _claimed_archs(plan: Plan) -> list[gpu.Arch]:
    arch_list, _ = arch_source(plan.recipe, plan.archive.config if plan.archive else None)
    try:
        return gpu.parse_arch_list(arch_list) if arch_list else []
    except ValueError:
        return []


def _registry_ref(plan: Plan, digest: str | None) -> None:
    recipe = plan.recipe
    digest = digest or recipe.manifest_digest
    if not recipe.repository:
        plan.problems.append(UsageError(detail=f"recipe {recipe.name} names no [registry] repository"))
    elif not digest:
        plan.problems.append(UsageError(
            detail=f"recipe {recipe.name} records no registry manifest digest; pass --digest sha256:... "
                   "(vault pulls by digest, never by a tag that can move)"))  # fmt: skip
    elif not DIGEST.fullmatch(digest):
        plan.problems.append(UsageError(detail=f"--digest must be sha256:<64 hex digits>, not {digest!r}"))
    else:
        plan.ref = f"{recipe.repository}@{digest}"
        registry = dd.registry_of(recipe.repository)
        if not dd.has_login(registry):
            plan.notes.append(f"no docker login for {registry} in your docker config: a private repository needs "
                              f"`docker login {registry}` first")  # fmt: skip
    if plan.expected_config is None:
        plan.problems.append(UsageError(
            detail=f"no config digest to prove {recipe.name} against: index the mirror's archive or add "
                   "config_digest to the recipe"))  # fmt: skip


def _space_check(plan: Plan) -> None:
    plan.free = dd.free_space(plan.daemon)
    plan.need = plan.archive.raw_size * LOAD_FACTOR if plan.archive else None
    if plan.free is None:
        plan.notes.append(f"free space: the data root of {plan.daemon.host} is not on this machine; not checked")
    elif plan.need is not None and plan.free < plan.need:
        plan.problems.append(DaemonNoSpace(root=plan.daemon.root_dir, free=_mib(plan.free), name=plan.recipe.name,
                                           need=_mib(plan.need)))  # fmt: skip


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _tag_check(plan: Plan) -> None:
    plan.holders = dd.tag_holders(plan.daemon, plan.tags)
    plan.moves, conflicts = tag_verdict(plan.choices, plan.holders, _accepted_ids(plan), plan.expected_config)
    plan.problems += conflicts
    plan.notes += [move_note(tag, holder) for tag, holder in plan.moves.items()]


def tag_verdict(choices: Choices, holders: dict[str, str | None], accepted: set[str],
                image: str | None) -> tuple[dict[str, str], list[TagConflict]]:  # fmt: skip
    """The one tag check: a tag held by an image other than the accepted ones is refused (docker load would
    silently take it away), or with --retag moved; (tag -> the image it moves from, the conflicts)."""
    taken = {tag: holder for tag, holder in holders.items()
             if holder is not None and accepted and holder not in accepted}  # fmt: skip
    if choices.retag:
        return taken, []
    return {}, [TagConflict(tag=tag, holder=holder[:19], name=choices.recipe.name, image=(image or "?")[:19])
                for tag, holder in taken.items()]  # fmt: skip


def move_note(tag: str, holder: str) -> str:
    return f"tag {tag} moves from image {holder[:19]} (--retag)"


def config_mismatch(recipe: DockerRecipe, found: str, where: str) -> ImageMismatch | None:
    """The one config digest check: the archive's image config against the recipe's, when it records one."""
    if not recipe.config_digest or found == recipe.config_digest:
        return None
    what = f"{where} holds config {found}, recipe {recipe.name} expects {recipe.config_digest}"
    return ImageMismatch(what=what, action="fix the recipe or the mirror; nothing was loaded")


def _accepted_ids(plan: Plan) -> set[str]:
    """Ids the restored image may have: its config digest (classic store) or, on the containerd store, its
    manifest digest."""
    ids = {plan.expected_config} if plan.expected_config else set()
    if plan.ref:
        ids.add(plan.ref.split("@", 1)[1])
    return ids


# -- restore -------------------------------------------------------------------------------------------------------
@dataclass
class Loading:
    """What the stream gate finds in the archive's own config, before docker gets a byte it could load."""

    gpu: gpu.GpuFit
    moves: dict[str, str]  # tag -> the image --retag takes it from (preflight's, and those only the archive names)
    existed: bool = False  # the image was in the daemon before this restore: a mismatch then removes nothing


def restore(conn: sqlite3.Connection, plan: Plan, *, timeout: float | None = None, progress=None) -> ImageRestored:
    """Load (or pull) the planned image, prove it, tag it, and record the restore (failed ones too: one that
    preflight refused, as the daemon down or a tag held by another image, is a failed restore like any other)."""
    started, clock = now(), time.monotonic()
    source = (plan.archive.mirror_path if plan.archive else "") if plan.source == "archive" else plan.ref or ""
    try:
        if plan.problems:
            raise plan.problems[0]
        if plan.source == "archive":
            done = _from_archive(conn, plan, timeout, progress)
        else:
            done = _from_registry(plan, progress)
    except VaultError as exc:
        status = "interrupted" if exc.exit_code == INTERRUPTED else "failed"
        _record(conn, plan, source, None, status, {"error": str(exc), "exit_code": exc.exit_code}, started)
        raise
    except KeyboardInterrupt:
        _record(conn, plan, source, None, "interrupted", {}, started)
        raise
    done = dataclasses.replace(done, seconds=round(time.monotonic() - clock, 3))
    _record(conn, plan, source, done, "ok", done.to_json(), started)
    return done


def _record(conn: sqlite3.Connection, plan: Plan, source: str, done: ImageRestored | None, status: str, detail: dict,
            started: str) -> None:  # fmt: skip
    mirror_id = plan.archive.mirror_id if plan.archive else None
    entry_id = plan.archive.entry_id if plan.archive else plan.recipe.entry
    source_hash = (done.sha256 or done.manifest_digest) if done else (plan.sha256 or plan.ref)
    record_restore(conn, kind=KIND, mirror_id=mirror_id, entry_id=entry_id, name=plan.recipe.name, source=source,
                   source_hash=source_hash, target=done.image_id if done else "", status=status, detail=detail,
                   started_at=started)  # fmt: skip


def _archive_opener(conn: sqlite3.Connection, info: ArchiveInfo):
    """The image archive, opened as every plain mirror file is: a regular file inside the mirror, nothing else."""
    from cloudvault.catalog.lookup import file_location
    from cloudvault.io.members import open_plain

    root, path, raw, _, _ = file_location(conn, info.file.file_id)
    return lambda: open_plain(root, path, raw)


def _from_archive(conn: sqlite3.Connection, plan: Plan, timeout: float | None, progress) -> ImageRestored:
    from cloudvault.restore.docker.stream import VerifiedBody

    info, recipe = plan.archive, plan.recipe
    loading = Loading(plan.gpu, dict(plan.moves))
    if progress is not None:
        progress.start(info.file.size, info.member_count)
    body = VerifiedBody(_archive_opener(conn, info), label=info.mirror_path, expected_sha256=plan.sha256,
                        sums_label=f"{info.entry_id}/{recipe.sha256sums}", progress=progress,
                        gate=lambda image: _stream_gate(plan, loading, image))  # fmt: skip
    # the read timeout covers the daemon registering layers after the last byte: size it to the archive
    plan.daemon.client.timeout = timeout or max(300.0, info.raw_size / (20 << 20))
    before = dd.inventory(plan.daemon)
    try:
        dd.load(plan.daemon, recipe.name, body)
    finally:
        if progress is not None:
            progress.finish()
    image = body.image
    _undo_unproven(plan, before, dd.inventory(plan.daemon), image)
    found = dd.image(plan.daemon, image.config.digest)
    accepted = {image.config.digest, *image.manifest_digests}
    problem = _loaded_problem(found, image.config, accepted, recipe)
    if problem:
        if not loading.existed and found is not None:
            dd.remove(plan.daemon, found["Id"])
        raise ImageMismatch(what=problem, action="kept the image that was there before" if loading.existed else
                            "removed what was loaded")  # fmt: skip
    tags = _apply_tags(plan, found["Id"])
    return ImageRestored(recipe.name, "archive", found["Id"], image.config.digest, tags,
                         len(image.config.diff_ids), sha256=image.sha256, bytes_in=info.file.size,
                         bytes_out=body.bytes_out, moved_tags=tuple(move_note(t, h) for t, h in loading.moves.items()),
                         gpu=loading.gpu)  # fmt: skip


def _stream_gate(plan: Plan, loading: Loading, image) -> None:
    """The checks that need the image config, run on the streamed one before docker gets manifest.json: raising
    here cuts the stream, so nothing is loaded. (Preflight ran them already when it could read the config.)"""
    recipe, config, choices = plan.recipe, image.config, plan.choices
    if mismatch := config_mismatch(recipe, config.digest, "the archive"):
        raise mismatch
    arch_list, where = arch_source(recipe, config)
    loading.gpu = gpu.check_fit(arch_list, where, plan.gpu.gpus)
    if problem := gpu_problem(recipe.name, loading.gpu, require_gpu=choices.require_gpu, ignore_gpu=choices.ignore_gpu):
        raise problem
    loading.existed = dd.image(plan.daemon, config.digest) is not None
    unseen = [t for t in image.repo_tags if t not in plan.holders]  # tags preflight could not know of
    accepted = {config.digest, *image.manifest_digests}
    moves, conflicts = tag_verdict(choices, dd.tag_holders(plan.daemon, unseen), accepted, config.digest)
    if conflicts:
        raise conflicts[0]
    loading.moves.update(moves)


def unproven_changes(before: dict[str, str], after: dict[str, str], image_id: str, tags: tuple[str, ...]) -> dict:
    """What a load changed beyond the proven image and its tags: ref (a tag, or an untagged image's id) -> the
    image that held it before (None: it is new)."""
    changed, known = {}, set(before.values())
    for ref, holder in after.items():
        if before.get(ref) == holder or (holder == image_id and (ref in tags or ref == image_id)):
            continue
        if ref == holder and holder in known:  # an image that lost its last tag to the proven one (--retag)
            continue
        changed[ref] = before.get(ref)
    return changed


def _undo_unproven(plan: Plan, before: dict[str, str], after: dict[str, str], image) -> None:
    """Compare the daemon's images and tags before and after the load: a tag docker moved or an image it added
    that the stream did not prove is undone (tags back to their images, new images removed), then reported."""
    accepted = {image.config.digest, *image.manifest_digests}
    image_id = next((after[t] for t in image.repo_tags if after.get(t) in accepted), image.config.digest)
    changed = unproven_changes(before, after, image_id, image.repo_tags)
    if not changed:
        return
    for ref, holder in changed.items():
        if holder is not None and ref != holder:
            dd.tag(plan.daemon, holder, ref)
        elif ref != after[ref]:
            dd.untag(plan.daemon, ref)
    for added in set(after.values()) - set(before.values()):
        dd.remove(plan.daemon, added)
    raise ImageMismatch(what=f"docker load of {plan.recipe.name} changed what the archive did not prove: "
                        f"{', '.join(sorted(changed))}", action="undone: tags put back, images it added removed; "
                        "not proven, so nothing was kept")  # fmt: skip


def _loaded_problem(found: dict | None, config: ImageConfig, accepted: set[str], recipe: DockerRecipe) -> str | None:
    """Why the image in the daemon is not the one the archive proved (None: it is)."""
    if found is None:
        return f"the daemon reports no image {config.digest} after loading {recipe.name}"
    if found["Id"] not in accepted:
        return f"the daemon loaded {recipe.name} as {found['Id']}, the archive's config is {config.digest}"
    layers = tuple((found.get("RootFS") or {}).get("Layers") or ())
    if layers != config.diff_ids:
        return f"the daemon's layers of {recipe.name} are not the archive's diff_ids ({len(layers)} vs " \
               f"{len(config.diff_ids)})"  # fmt: skip
    return None  # the config digest against the recipe's was checked by the stream gate, before loading


def _apply_tags(plan: Plan, image_id: str) -> tuple[str, ...]:
    for ref in plan.recipe.tags:
        dd.tag(plan.daemon, image_id, ref)
    found = dd.image(plan.daemon, image_id) or {}
    return tuple(sorted(found.get("RepoTags") or ()))


def _from_registry(plan: Plan, progress=None) -> ImageRestored:
    """Pull repository@digest, then prove it is the archive's image (same config digest, same layers)."""
    recipe = plan.recipe
    repository, digest = plan.ref.split("@", 1)
    before = dd.image(plan.daemon, plan.ref)
    dd.pull(plan.daemon, repository, digest, progress)
    found = dd.image(plan.daemon, plan.ref)
    archive_config = plan.archive.config if plan.archive else None
    expected_layers = archive_config.diff_ids if archive_config else None
    layers = tuple((found or {}).get("RootFS", {}).get("Layers") or ())
    problem = None
    if found is None:
        problem = f"the daemon reports no image {plan.ref} after pulling it"
    elif found["Id"] != plan.expected_config and not (plan.daemon.containerd_store and layers == expected_layers):
        problem = f"{plan.ref} is image {found['Id']}, but the archive's config is {plan.expected_config}"
    elif expected_layers is not None and layers != expected_layers:
        problem = f"the layers of {plan.ref} are not the archive's diff_ids"
    if problem:
        if before is None and found is not None:
            dd.remove(plan.daemon, found["Id"])
        raise ImageMismatch(what=problem, action="removed the pulled image" if before is None else "it was there "
                            "before and is kept")  # fmt: skip
    tags = _apply_tags(plan, found["Id"])
    return ImageRestored(recipe.name, "registry", found["Id"], plan.expected_config, tags, len(layers),
                         manifest_digest=digest, moved_tags=tuple(move_note(t, h) for t, h in plan.moves.items()),
                         repo_digests=tuple(sorted(found.get("RepoDigests") or ())), gpu=plan.gpu)  # fmt: skip
