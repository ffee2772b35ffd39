"""What the mirror says about a docker image: its recipe, its archive in the catalog, its SHA256SUMS line.

Only the catalog and the archive's two small members (manifest.json and the image config) are read here, through
the verified member reader; the archive itself is streamed by stream.py when it is restored.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from cloudvault.errors import RecipeInvalid, VaultError
from cloudvault.models import Member
from cloudvault.recipe import Required
from cloudvault.restore.docker.errors import ArchiveNotIndexed, ArchiveNotInSums
from cloudvault.restore.docker.oci import ImageConfig, parse_config, parse_manifest, parse_sha256sums, sums_entry
from cloudvault.tools import gpu

KIND = "docker"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
SCHEMA = {
    "description": str,
    "entry": Required(str),
    "archive": Required(str),
    "sha256sums": str,
    "tags": Required(list),
    "config_digest": str,
    "cuda_version": str,
    "arch_list": str,
    "built_on": str,
    "registry": {"repository": Required(str), "tag": str, "manifest_digest": str},
}


@dataclass(frozen=True)
class DockerRecipe:
    name: str
    path: Path
    entry: str
    archive: str
    sha256sums: str
    tags: tuple[str, ...]
    config_digest: str | None = None
    cuda_version: str | None = None
    arch_list: str | None = None
    description: str = ""
    built_on: str | None = None
    repository: str | None = None
    registry_tag: str | None = None
    manifest_digest: str | None = None


def load_docker_recipe(name: str) -> DockerRecipe:
    """The recipe, validated: schema (recipe.py), then tags, digests and arch list (RecipeInvalid, exit 2)."""
    from cloudvault.recipe import load_recipe

    path, data = load_recipe(KIND, name, SCHEMA)
    registry = data.get("registry", {})
    if not all(isinstance(t, str) and t for t in data["tags"]):
        raise RecipeInvalid(path=path, detail="'tags' must be a list of image references such as 'repo:tag'")
    for key, value in (("config_digest", data.get("config_digest")),
                       ("registry.manifest_digest", registry.get("manifest_digest"))):  # fmt: skip
        if value is not None and not DIGEST.fullmatch(value):
            raise RecipeInvalid(path=path, detail=f"{key!r} must be sha256:<64 hex digits>, not {value!r}")
    if data.get("arch_list"):
        try:
            gpu.parse_arch_list(data["arch_list"])
        except ValueError as exc:
            raise RecipeInvalid(path=path, detail=f"'arch_list': {exc}") from None
    return DockerRecipe(
        name=path.stem, path=path, entry=data["entry"], archive=data["archive"],
        sha256sums=data.get("sha256sums", "SHA256SUMS"), tags=tuple(data["tags"]),
        config_digest=data.get("config_digest"), cuda_version=data.get("cuda_version"),
        arch_list=data.get("arch_list"), description=data.get("description", ""), built_on=data.get("built_on"),
        repository=registry.get("repository"), registry_tag=registry.get("tag"),
        manifest_digest=registry.get("manifest_digest"),
    )  # fmt: skip


def recipe_names() -> list[str]:
    from cloudvault.recipe import recipe_names as names

    return names(KIND)


# -- the archive as the catalog knows it ---------------------------------------------------------------------------
@dataclass
class ArchiveInfo:
    """The recipe's archive in the catalog, and what its manifest.json and config say (read, not loaded)."""

    mirror_id: int
    entry_id: str
    file: Member
    raw_size: int
    member_count: int
    config: ImageConfig | None = None
    repo_tags: tuple[str, ...] = ()
    problem: str | None = None  # why the config could not be read
    unread: str | None = None  # why the config was not read before loading (it costs a full decode)
    layers: list[Member] = field(default_factory=list)  # the layer members, in manifest order

    @property
    def mirror_path(self) -> str:
        return f"{self.entry_id}/{self.file.path}" if self.entry_id else self.file.path


def archive_info(conn: sqlite3.Connection, recipe: DockerRecipe, *, budget: int | None = None) -> ArchiveInfo:
    """Find the archive in the catalog; read manifest.json and the config through the verified member reader.

    Only those two members are read: on a multi-frame (or optimized) archive that is a seek to their frames. When
    reaching one would decode more than budget bytes first (a big single-frame archive), they are left unread
    (`unread` says why) and the stream checks them before anything is loaded."""
    from cloudvault.catalog.lookup import EntryMembers
    from cloudvault.catalog.query import resolve_entry

    mirror_id, entry_id, _ = resolve_entry(conn, recipe.entry)
    files = [m for m in EntryMembers(conn, mirror_id, entry_id).exact(recipe.archive) if m.archive is None]
    if not files:
        raise ArchiveNotIndexed(path=recipe.archive, entry=entry_id)
    inside = EntryMembers(conn, mirror_id, entry_id, archive=recipe.archive)
    members = [m for m in inside.glob("*") if m.file_id == files[0].file_id]
    info = ArchiveInfo(mirror_id, entry_id, files[0], sum(m.size for m in members), len(members))
    try:
        manifest_member = _one(members, "manifest.json")
        if _over_budget(conn, info, manifest_member, budget):
            return info
        manifest = parse_manifest(_read(conn, manifest_member))
        config_member = _one(members, manifest[0].config)
        if _over_budget(conn, info, config_member, budget):
            return info
        config_bytes = _read(conn, config_member)
        info.config = parse_config(config_bytes, "sha256:" + _sha256(config_bytes))
        info.repo_tags = manifest[0].repo_tags
        info.layers = [_one(members, path) for path in manifest[0].layers]
    except (VaultError, ValueError, IndexError) as exc:
        info.problem = str(exc)
    return info


def _over_budget(conn: sqlite3.Connection, info: ArchiveInfo, member: Member, budget: int | None) -> bool:
    """Whether reading member costs more than budget decoded bytes before it (then info.unread says so)."""
    if budget is None:
        return False
    import os

    from cloudvault.archive.reader import frame_for_offset
    from cloudvault.catalog.lookup import archive_location, frame_table

    loc = archive_location(conn, member.file_id)
    copy = bool(loc.copy_path and os.path.exists(loc.copy_path))
    frames = frame_table(conn, loc.archive_id, seekable_copy=copy)
    start = frame_for_offset(frames, member.data_offset).raw_offset if frames else 0
    cost = member.data_offset - start
    if cost > budget:
        info.unread = (
            f"reading its {member.path} first would decode {cost / (1 << 30):.1f} GiB (one zstd frame); "
            f"it is checked as it streams instead (`vault optimize {info.entry_id}` makes it a seek)"
        )
    return cost > budget


def _one(members: list[Member], path: str) -> Member:
    found = [m for m in members if m.path == path]
    if not found:
        raise ValueError(f"{path} is not in the archive")
    return found[0]


def _read(conn: sqlite3.Connection, member: Member) -> bytes:
    from cloudvault.io.members import MemberReader

    with MemberReader(conn) as reader:
        return b"".join(reader.open(member))


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def expected_sha256(conn: sqlite3.Connection, recipe: DockerRecipe, info: ArchiveInfo) -> str:
    """The archive's line in the entry's SHA256SUMS (read verified from the catalog); exit 5 when there is none."""
    from cloudvault.catalog.lookup import EntryMembers

    found = [m for m in EntryMembers(conn, info.mirror_id, info.entry_id).exact(recipe.sha256sums) if not m.archive]
    if not found:
        raise ArchiveNotIndexed(path=recipe.sha256sums, entry=info.entry_id)
    sums = parse_sha256sums(_read(conn, found[0]).decode("utf-8", "replace"))
    sums_dir = recipe.sha256sums.rpartition("/")[0]
    hex_ = sums_entry(sums, recipe.archive, sums_dir)
    if hex_ is None:
        raise ArchiveNotInSums(sums=f"{info.entry_id}/{recipe.sha256sums}", path=recipe.archive)
    return hex_
