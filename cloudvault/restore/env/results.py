"""What `vault restore env` hands the command line: frozen, typed results of a listing, a plan, a restore and a
move. Each one's to_json() is the one schema for --json and for the detail the catalog stores (docs/commands/
restore-env.md says its fields); the fields are in the order the JSON has them."""

from __future__ import annotations

from dataclasses import dataclass, field

from cloudvault.documents import SHOWN_ONLY, Document
from cloudvault.restore.env.meta import TorchGpuFit


@dataclass(frozen=True)
class EnvListed(Document):
    """One env as `--list` shows it, from member names alone."""

    name: str
    where: str
    problem: str | None
    shared: str | None
    archive: str
    archive_size: int | None
    size: int
    files: int
    prefix: str | None
    python: str | None
    torch: dict | None
    conda_packages: int
    gpu: TorchGpuFit | None


@dataclass(frozen=True)
class EnvPlan(Document):
    """What a restore of one env would do (`--dry-run`), from the catalog and conda-meta alone."""

    name: str
    archive: str
    archive_blake3: str | None
    archive_size: int | None
    bytes: int
    files: int
    target: str
    old_prefix: str
    relocate: bool
    free: int
    enough_space: bool
    exists: bool
    conda_files: int
    conda_text_with_prefix: int
    conda_binary_with_prefix: int
    binary_misfits: tuple[str, ...]
    pip_scripts: int
    pip_pyc: int
    package_cache: str | None
    checks: tuple[str, ...]
    risks: tuple[str, ...]


@dataclass(frozen=True)
class MovePlan(Document):
    """What `--move FROM --dry-run` would do: the prefix the env's files speak (its marker's), bytes, space."""

    name: str
    moved_from: str
    old_prefix: str
    target: str
    bytes: int
    free: int
    enough_space: bool
    exists: bool
    source: str | None
    checks: tuple[str, ...]
    risks: tuple[str, ...]


@dataclass(frozen=True)
class Verified(Document):
    """The staged bytes checked: against conda-meta's sha256 and pip RECORD files, and the catalog's BLAKE3."""

    conda_checked: int
    conda_differ: tuple[str, ...]
    conda_missing: int
    record_checked: int
    record_differ: tuple[str, ...]
    blake3_files: int


@dataclass(frozen=True)
class PythonUsed(Document):
    """The interpreter a restored venv runs on: its base, version, and the one --python replaced."""

    base: str | None
    version: str | None
    replaced: str | None


@dataclass(frozen=True)
class SmokeCheck(Document):
    """One smoke check run inside the env: its name and command, whether it passed, its exit code (None: it could
    not run) and the last of its output."""

    name: str
    command: str
    ok: bool
    exit_code: int | None
    output: str


@dataclass(frozen=True)
class InstalledTorch(Document):
    """The torch a restored env holds (torch/version.py) and its kernels against the GPUs (None: a CPU build, or
    an arch list that cannot be known); its document is the torch and the fit's fields beside it."""

    torch: dict  # env/meta.py torch_version_file: version, cuda, from
    fit: TorchGpuFit | None

    def to_json(self) -> dict:
        return {"torch": self.torch, **(self.fit.to_json() if self.fit else {})}

    @property
    def notes(self) -> tuple[str, ...]:
        return self.fit.notes if self.fit else ()


@dataclass(frozen=True)
class AlreadyRestored(Document):
    """The target already holds this archive's env at this prefix: nothing done, nothing recorded."""

    name: str
    target: str
    archive: str
    status: str = "already restored"

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "target": self.target, "archive": self.archive}

    @property
    def checks(self) -> tuple:
        return ()


@dataclass(frozen=True)
class EnvRestored(Document):
    """One env restored at target: what was written, verified, relocated and checked."""

    name: str
    status: str
    target: str
    old_prefix: str
    archive: str
    archive_blake3: str | None
    files: int
    links: int
    bytes: int
    rewritten: int
    rewritten_how: dict[str, int]
    unpatched: tuple[dict, ...]  # {path, why}
    pyc_removed: int
    pyc_recompiled: int
    pyc_moved: int
    pyc_note: str
    verified: Verified
    checks: tuple[SmokeCheck, ...]
    gpu: InstalledTorch | None
    pitfalls: tuple[str, ...]
    python: PythonUsed | None
    seconds: dict[str, float]


@dataclass(frozen=True)
class EnvMoved(Document):
    """An env vault restored, moved to a new prefix (relocated again) and its old folder removed."""

    name: str
    status: str
    target: str
    old_prefix: str
    moved_from: str
    archive: str | None
    archive_blake3: str | None
    files: None
    rewritten: int
    unpatched: tuple[dict, ...]
    pyc_removed: int
    pyc_recompiled: int
    pyc_moved: int
    pyc_note: str
    checks: tuple[SmokeCheck, ...]
    gpu: InstalledTorch | None
    pitfalls: tuple[str, ...]


@dataclass(frozen=True)
class EnvList(Document):
    """`vault restore env RECIPE --list`."""

    recipe: str
    entry: str
    envs: tuple[EnvListed, ...]
    skipped: tuple[str, ...]
    archives: str = field(default="", metadata=SHOWN_ONLY)  # the recipe's glob, for the heading


@dataclass(frozen=True)
class EnvPlans(Document):
    """`vault restore env RECIPE --dry-run`: one plan per env (a move's plan with --move)."""

    recipe: str
    plan: tuple[EnvPlan | MovePlan, ...]


@dataclass(frozen=True)
class EnvsRestored(Document):
    """`vault restore env RECIPE ...`: each env restored (or moved, or already there), in the order placed."""

    recipe: str
    restored: tuple[EnvRestored | EnvMoved | AlreadyRestored, ...]

    def failed_checks(self) -> list[str]:
        """'env: check' for each smoke check that failed (the envs stay placed)."""
        return [f"{r.name}: {c.name}" for r in self.restored for c in r.checks if not c.ok]
