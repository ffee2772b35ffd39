"""The three things `vault restore docker` does, each one call from the command line: list the image recipes and
their archives, check a restore (--dry-run, --check-gpu), restore an image; each returns a frozen result
(results.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from cloudvault import errors
from cloudvault.progress import Progress
from cloudvault.restore.docker.restore import Choices, Plan
from cloudvault.restore.docker.results import DaemonSeen, ImageChecked, ImageList, ImageListed, RestoreDone
from cloudvault.restore.docker.source import DockerRecipe


@dataclass(frozen=True)
class DockerOptions:
    """What the user asked of `vault restore docker NAME`: the recipe and the restore's choices, a registry digest,
    how far to go (--check-gpu: the GPU alone; --dry-run: every check), --scan-kernels and the daemon timeout."""

    choices: Choices
    digest: str | None = None
    dry_run: bool = False
    gpu_only: bool = False
    scan: bool = False
    timeout: float | None = None

    @property
    def checking(self) -> bool:
        return self.dry_run or self.gpu_only


def list_images(conn: sqlite3.Connection | None, recipes: tuple[DockerRecipe, ...]) -> ImageList:
    """`--list`: each recipe's archive as the catalog records it (without a catalog, what the recipe says)."""
    return ImageList(tuple(_listed(conn, recipe) for recipe in recipes))


def check_image(conn: sqlite3.Connection | None, options: DockerOptions) -> ImageChecked:
    """`--dry-run` / `--check-gpu`: every check a restore runs first (the GPU alone with --check-gpu); nothing
    loaded. A check that fails is the result's failure."""
    from cloudvault.restore.docker.restore import preflight

    plan = preflight(conn, options.choices, digest=options.digest, gpu_only=options.gpu_only, scan=options.scan)
    return checked(plan, options.gpu_only)


def restore_image(conn: sqlite3.Connection, options: DockerOptions,
                  progress: Callable[[str], Progress] = lambda label: Progress(),
                  warn: Callable[[str], None] = lambda note: None) -> RestoreDone:  # fmt: skip
    """Check, then load (or pull) the image, prove it, tag it and record it; each note of the checks handed to
    warn() before the load starts. A check that fails ends it (recorded as a failed restore)."""
    from cloudvault.restore.docker.restore import preflight, restore

    plan = preflight(conn, options.choices, digest=options.digest, scan=options.scan)
    for note in plan.notes:
        warn(note)
    done = restore(conn, plan, timeout=options.timeout,
                   progress=progress("pulling" if plan.source == "registry" else "loading"))  # fmt: skip
    return RestoreDone(done, done.gpu)


def failure(result) -> errors.VaultError | None:
    """How a check ended when it found a problem (its first), else None (a listing, a restore: None)."""
    return result.failure if isinstance(result, ImageChecked) else None


def checked(plan: Plan, gpu_only: bool) -> ImageChecked:
    """The Plan preflight found, as the frozen document of the checks."""
    a, r = plan.archive, plan.recipe
    d = plan.daemon
    daemon = DaemonSeen(d.host, d.version, d.root_dir, plan.free, plan.need) if d is not None else None
    kernels = None if plan.kernels is None else {k.path: tuple(str(a) for a in k.archs) for k in plan.kernels}
    return ImageChecked(
        r.name, plan.source, plan.ref, plan.sha256, a.mirror_path if a else None, a.file.size if a else None,
        plan.expected_config, plan.gpu, daemon, dict(plan.holders), tuple(plan.notes),
        tuple(str(p) for p in plan.problems), kernels, failure=plan.problems[0] if plan.problems else None,
        gpu_only=gpu_only, recipe_path=str(r.path), raw_size=a.raw_size if a else None,
        archive_config=a.config.digest if a and a.config else None,
        cuda_version=(a.config.cuda_version if a and a.config else None) or r.cuda_version,
        sums=f"{a.entry_id}/{r.sha256sums}" if a else "",
    )


def _listed(conn: sqlite3.Connection | None, recipe: DockerRecipe) -> ImageListed:
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
    return ImageListed(
        recipe.name, f"{recipe.entry}/{recipe.archive}", info.file.size if info else None,
        info.raw_size if info else None, tuple(dict.fromkeys([*(info.repo_tags if info else ()), *recipe.tags])),
        config.digest if config else recipe.config_digest, (config.cuda_version if config else None)
        or recipe.cuda_version, arch, where, recipe.repository, recipe.manifest_digest,
        problem or (info.problem if info else None), info.unread if info else None,
    )  # fmt: skip
