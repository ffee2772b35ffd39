"""What `vault restore docker` hands the command line: frozen, typed results of a listing, the checks (--dry-run,
--check-gpu) and a restore. Each one's to_json() is the one schema for --json and, for a restore, the detail the
catalog stores (docs/commands/restore-docker.md says its fields); the fields are in the order the JSON has them."""

from __future__ import annotations

from dataclasses import dataclass, field

from cloudvault.documents import SHOWN_ONLY, Document
from cloudvault.errors import VaultError
from cloudvault.tools.gpu import GpuFit


@dataclass(frozen=True)
class ImageListed(Document):
    """One image recipe as `--list` shows it: its archive as the catalog (when there is one) records it."""

    name: str
    archive: str
    size: int | None
    raw_size: int | None
    tags: tuple[str, ...]
    config_digest: str | None
    cuda_version: str | None
    arch_list: str | None
    arch_source: str
    registry: str | None
    manifest_digest: str | None
    problem: str | None
    unread: str | None


@dataclass(frozen=True)
class ImageList(Document):
    """`vault restore docker --list`."""

    images: tuple[ImageListed, ...]


@dataclass(frozen=True)
class DaemonSeen(Document):
    """The daemon that answered the checks: where, which docker, its data root, free space there and the need."""

    host: str
    version: str
    root: str
    free: int | None
    need: int | None


@dataclass(frozen=True)
class ImageChecked(Document):
    """`--dry-run` / `--check-gpu`: everything that would stop a restore, found before any byte is loaded. A check
    that fails adds `error` and `exit_code` (the first problem's) to the document."""

    name: str
    source: str
    ref: str | None
    sha256: str | None
    archive: str | None
    size: int | None
    config_digest: str | None
    gpu: GpuFit
    daemon: DaemonSeen | None
    tags: dict[str, str | None]  # tag -> the image holding it now (None: free)
    notes: tuple[str, ...]
    problems: tuple[str, ...]
    kernels: dict[str, tuple[str, ...]] | None  # --scan-kernels: library -> the targets it holds
    failure: VaultError | None = field(default=None, metadata=SHOWN_ONLY)  # the first problem: how it ends
    gpu_only: bool = field(default=False, metadata=SHOWN_ONLY)
    recipe_path: str = field(default="", metadata=SHOWN_ONLY)
    raw_size: int | None = field(default=None, metadata=SHOWN_ONLY)
    archive_config: str | None = field(default=None, metadata=SHOWN_ONLY)  # the digest of the config read
    cuda_version: str | None = field(default=None, metadata=SHOWN_ONLY)
    sums: str = field(default="", metadata=SHOWN_ONLY)  # ENTRY/SHA256SUMS the sha256 comes from

    def to_json(self) -> dict:
        ended = {"error": str(self.failure), "exit_code": self.failure.exit_code} if self.failure else {}
        return super().to_json() | ended


@dataclass(frozen=True)
class ImageRestored(Document):
    """A finished restore: the image id and what was proven about it (the catalog's detail of the restore)."""

    name: str
    source: str
    image_id: str
    config_digest: str
    tags: tuple[str, ...]
    layers: int
    sha256: str | None = None
    manifest_digest: str | None = None
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0.0
    moved_tags: tuple[str, ...] = ()
    repo_digests: tuple[str, ...] = ()  # the daemon's RepoDigests of it: repo@digest it came as
    gpu: GpuFit | None = None  # the fit of the image restored (the streamed config's, where preflight had none)


@dataclass(frozen=True)
class RestoreDone(Document):
    """`vault restore docker NAME`: the image restored, and the GPU fit it was loaded under."""

    restored: ImageRestored
    gpu: GpuFit | None
