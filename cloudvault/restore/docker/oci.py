"""What a `docker save` archive holds, read as pure functions: manifest.json, image configs, SHA256SUMS lines.

Both layouts docker writes are understood: the classic one (`<id>/layer.tar`, `<config hex>.json`, docker < 25)
and the OCI one (`blobs/sha256/<hex>`, `index.json`, `oci-layout`, docker >= 25). Either way `manifest.json`
names each image's config and layers by their path in the tar, and the config's `rootfs.diff_ids` are the
sha256 of each layer's uncompressed tar. The config digest is the image id on docker's classic store.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from cloudvault.tools import cuda

# Top-level members docker reads to know what to load; they come last in every docker save archive.
METADATA = frozenset({"manifest.json", "index.json", "repositories", "oci-layout"})
_BLOB = re.compile(r"(?:\./)?blobs/(sha256)/([0-9a-f]{64})")
_CLASSIC_CONFIG = re.compile(r"(?:\./)?([0-9a-f]{64})\.json")
_SUMS_LINE = re.compile(r"([0-9a-fA-F]{64}) [ *](.+)")


class ArchiveFormatError(ValueError):
    """The archive is not a docker save archive vault can check (the message says why)."""


@dataclass(frozen=True)
class ManifestItem:
    """One image of manifest.json: config and layer paths inside the tar, and the tags docker load applies."""

    config: str
    repo_tags: tuple[str, ...]
    layers: tuple[str, ...]


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an image config that restore checks and shows."""

    digest: str
    diff_ids: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    architecture: str = ""
    created: str = ""

    @property
    def arch_list(self) -> str | None:
        """The CUDA arch list the image was built for: its env, else a label naming one."""
        found = cuda.from_environment(self.env, self.labels)
        return found.text if found else None

    @property
    def cuda_version(self) -> str | None:
        if self.env.get("CUDA_VERSION"):
            return self.env["CUDA_VERSION"]
        if m := re.search(r"cuda>=(\d+(?:\.\d+)*)", self.env.get("NVIDIA_REQUIRE_CUDA", "")):
            return m[1]
        for key, value in self.labels.items():
            if key.lower().endswith("cuda_version") and value:
                return value
        return None


def member_name(path: str) -> str:
    """A tar path as docker's manifest names it: no leading './'."""
    while path.startswith("./"):
        path = path[2:]
    return path


def named_digest(path: str) -> str | None:
    """The digest a member's name claims ('blobs/sha256/<hex>', '<hex>.json'), or None if its name claims none."""
    path = member_name(path)
    if m := _BLOB.fullmatch(path):
        return f"{m[1]}:{m[2]}"
    if m := _CLASSIC_CONFIG.fullmatch(path):
        return f"sha256:{m[1]}"
    return None


def read_by_docker(name: str) -> str | None:
    """What docker load reads this member as ("file" or "dir"), or None when it does not read it by name: the
    metadata, a blob or digest-named config, a classic `<id>/layer.tar`, and the blob folders on the way."""
    if name in ("blobs", "blobs/sha256"):
        return "dir"
    if name in METADATA or named_digest(name) is not None or name.endswith("/layer.tar"):
        return "file"
    return None


def parse_manifest(data: bytes) -> list[ManifestItem]:
    """manifest.json of a docker save archive."""
    try:
        items = json.loads(data)
        return [
            ManifestItem(member_name(i["Config"]), tuple(i.get("RepoTags") or ()), tuple(map(member_name, i["Layers"])))
            for i in items
        ]
    except (ValueError, TypeError, KeyError) as exc:
        raise ArchiveFormatError(f"manifest.json is not a docker save manifest ({exc})") from None


def parse_config(data: bytes, digest: str) -> ImageConfig:
    """An image config JSON; digest is the sha256 of exactly these bytes."""
    try:
        doc = json.loads(data)
        inner = doc.get("config") or {}
        env = dict(e.split("=", 1) if "=" in e else (e, "") for e in inner.get("Env") or ())
        return ImageConfig(
            digest=digest,
            diff_ids=tuple(doc["rootfs"]["diff_ids"]),
            env=env,
            labels=dict(inner.get("Labels") or {}),
            architecture=doc.get("architecture", ""),
            created=doc.get("created", ""),
        )
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ArchiveFormatError(f"image config {digest} is not an image config ({exc})") from None


def parse_index(data: bytes) -> list[str]:
    """The manifest digests an OCI index.json names (the image id on docker's containerd store)."""
    try:
        return [m["digest"] for m in json.loads(data).get("manifests", [])]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ArchiveFormatError(f"index.json is not an OCI index ({exc})") from None


def parse_sha256sums(text: str) -> dict[str, str]:
    """`sha256sum` output ('<hex>  name' or '<hex> *name') as name -> lower-case hex; other lines are ignored."""
    sums = {}
    for line in text.splitlines():
        if m := _SUMS_LINE.fullmatch(line.rstrip("\r")):
            sums[member_name(m[2].strip())] = m[1].lower()
    return sums


def sums_entry(sums: dict[str, str], archive: str, sums_dir: str) -> str | None:
    """The hex SHA256SUMS records for archive (a path in the entry), by its path from the sums file's folder,
    its path in the entry, or its base name when only one line has that base name."""
    prefix = f"{sums_dir}/" if sums_dir else ""
    relative = archive[len(prefix) :] if archive.startswith(prefix) else archive
    for name in (relative, archive):
        if name in sums:
            return sums[name]
    base = archive.rsplit("/", 1)[-1]
    same = [h for name, h in sums.items() if name.rsplit("/", 1)[-1] == base]
    return same[0] if len(same) == 1 else None
