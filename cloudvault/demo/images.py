"""The demo's `_docker/`: three small real docker images (tandemspec, neo, headinfer) as `docker save` archives.

They are written in Python, without a daemon, byte for byte in the layout docker >= 25 saves (blobs/sha256/...,
index.json, manifest.json, oci-layout, repositories; uncompressed layer tars; Go's 1 KiB tar trailer), then
zstd-compressed like the lab's `images/*.tar.zst`, with a SHA256SUMS beside them. The config carries the lab's
build facts (TORCH_CUDA_ARCH_LIST=12.0, CUDA_VERSION, cross-compiled on g07) that `vault restore docker` checks.

The demo's images hold no program: their bytes are the same on every machine, so the figures the README shows of the
demo mirror (`vault verify`'s bytes hashed) are what a newcomer sees. Like the lab's, they are loaded and checked, not
run; a container of one still runs a program mounted into it (the docker executor's stand-in). The tests that run an
image build theirs with `runnable=True`: the host's busybox-static as its root layer, so `docker run --network none
IMAGE busybox echo hi` works.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import zstandard

MTIME = 1758844800  # 2026-09-26, when the images were copied
CREATED = "2026-09-26T00:00:00Z"
REPOSITORY = "junhyeong0724/marvell-tandemspec"
IMAGES = {
    "tandemspec": "TandemSpec/CompressSpec serving stack",
    "neo": "NEO (CPU-offloaded attention) serving stack",
    "headinfer": "HeadInfer (head-wise KV offload) serving stack",
}
BUILD_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "CUDA_VERSION": "12.8.1",
    "NVIDIA_REQUIRE_CUDA": "cuda>=12.8",
    "TORCH_CUDA_ARCH_LIST": "12.0",
}
BUSYBOX_LINKS = ("sh", "echo", "cat", "ls", "env", "true")


def tar_bytes(entries: list[tuple[str, bytes | None, str | None]], mode: int = 0o644) -> bytes:
    """A tar as Go's archive/tar writes it (ustar headers, 1 KiB trailer, no record padding).

    entries: (name, data, link): data None and link None is a folder, link set is a symlink."""
    out = io.BytesIO()
    for name, data, link in entries:
        info = tarfile.TarInfo(name)
        info.mtime, info.uname, info.gname = MTIME, "root", "root"
        if link is not None:
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, link, 0o777
        elif data is None:
            info.type, info.mode = tarfile.DIRTYPE, 0o755
        else:
            info.size, info.mode = len(data), 0o755 if name.startswith("bin/") else mode
        out.write(info.tobuf(format=tarfile.USTAR_FORMAT))
        if data:
            out.write(data + bytes(-len(data) % 512))
    out.write(bytes(1024))
    return out.getvalue()


def busybox_static() -> bytes | None:
    """The busybox-static binary, or None when the one installed is dynamically linked or missing."""
    path = shutil.which("busybox") or "/bin/busybox"
    if not os.path.isfile(path):
        return None
    data = Path(path).read_bytes()
    return None if b"/ld-linux" in data[:4096] or b"/ld-musl" in data[:4096] else data


DEMO_ROOT = b"the demo's images hold no program (cloudvault/demo/images.py)\n"


def root_layer(runnable: bool = False) -> bytes:
    """The image's first layer: a note, the same everywhere; runnable, the host's busybox-static and its links
    (the note where the host has none: still a loadable image)."""
    busybox = busybox_static() if runnable else None
    if busybox is None:
        return tar_bytes([("etc/", None, None), ("etc/NO_PROGRAMS", DEMO_ROOT, None)])
    links = [(f"bin/{name}", None, "busybox") for name in BUSYBOX_LINKS]
    return tar_bytes([("bin/", None, None), ("bin/busybox", busybox, None), *links])


def app_layer(name: str, notes: str) -> bytes:
    build_md = (
        f"# {name}\n\n{notes}.\nBuilt for the RTX PRO 6000 Blackwell (sm_120) by cross-compiling on g07 with "
        "TORCH_CUDA_ARCH_LIST=12.0 and CUDA 12.8.1.\nRunning on sm_120 and AMX was never verified.\n"
    )
    return tar_bytes([("etc/", None, None), ("etc/marvell-image", f"name={name}\n".encode(), None),
                      ("opt/", None, None), (f"opt/{name}/", None, None),
                      (f"opt/{name}/BUILD.md", build_md.encode(), None)])  # fmt: skip


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _json(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def image_config(layers: list[bytes], env: dict[str, str], labels: dict[str, str]) -> bytes:
    return _json({
        "architecture": "amd64", "os": "linux", "created": CREATED,
        "config": {"Env": [f"{k}={v}" for k, v in env.items()], "Cmd": ["/bin/sh"], "Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [_digest(layer) for layer in layers]},
        "history": [{"created": CREATED, "created_by": "vault demo: image layer"} for _ in layers],
    })  # fmt: skip


def save_archive(tag: str, layers: list[bytes], config: bytes) -> bytes:
    """The tar `docker save TAG` (docker >= 25) writes for an image of these layers and config."""
    oci_manifest = _json({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _digest(config),
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": _digest(layer),
                    "size": len(layer)} for layer in layers],
    })  # fmt: skip
    blobs = {_digest(b).split(":")[1]: b for b in [*layers, config, oci_manifest]}
    repo, _, version = tag.rpartition(":")
    index = _json({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": _digest(oci_manifest),
                       "size": len(oci_manifest), "annotations": {"io.containerd.image.name": f"docker.io/{tag}",
                                                                  "org.opencontainers.image.ref.name": version}}],
    })  # fmt: skip
    manifest = _json([{"Config": f"blobs/sha256/{_digest(config)[7:]}", "RepoTags": [tag],
                       "Layers": [f"blobs/sha256/{_digest(layer)[7:]}" for layer in layers]}])  # fmt: skip
    entries = [("blobs/", None, None), ("blobs/sha256/", None, None)]
    entries += [(f"blobs/sha256/{hex_}", blobs[hex_], None) for hex_ in sorted(blobs)]
    entries += [("index.json", index, None), ("manifest.json", manifest, None),
                ("oci-layout", b'{"imageLayoutVersion":"1.0.0"}', None),
                ("repositories", _json({repo: {version: _digest(layers[-1])[7:]}}), None)]  # fmt: skip
    return tar_bytes(entries)


def demo_image(name: str, tag: str | None = None, env: dict | None = None, labels: dict | None = None, *,
               runnable: bool = False) -> bytes:  # fmt: skip
    """The `docker save` tar of one demo image (tests vary tag, env and labels; runnable: see root_layer)."""
    layers = [root_layer(runnable), app_layer(name, IMAGES.get(name, name))]
    labels = labels if labels is not None else {
        "org.opencontainers.image.title": name, "org.marvell.built_on": "g07",
        "org.marvell.cuda_arch_list": "12.0", "org.marvell.note": "cross-compiled for sm_120; never run there",
    }  # fmt: skip
    config = image_config(layers, env if env is not None else BUILD_ENV, labels)
    return save_archive(tag or f"{REPOSITORY}:{name}", layers, config)


def compress(tar: bytes) -> bytes:
    """One zstd frame with a checksum, as `zstd -3 -T0` of the lab's images."""
    return zstandard.ZstdCompressor(level=3, write_checksum=True).compress(tar)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (MTIME, MTIME))


def build(tree: Path) -> None:
    """`_docker/images/*.tar.zst`, `_docker/SHA256SUMS` and `_docker/README.md` section 1 in the staged mirror."""
    sums = []
    for name in IMAGES:
        data = compress(demo_image(name))
        _write(tree / "_docker" / "images" / f"{name}.tar.zst", data)
        sums.append(f"{hashlib.sha256(data).hexdigest()}  images/{name}.tar.zst\n")
    _write(tree / "_docker" / "SHA256SUMS", "".join(sums).encode())
    readme = (
        "# Docker images\n\n## 1. Images\n\n"
        "tandemspec, neo, headinfer: built for sm_120 (RTX PRO 6000) by cross-compiling on g07,\n"
        f"TORCH_CUDA_ARCH_LIST=12.0. Also on Docker Hub: {REPOSITORY} (private), tags tandemspec, neo, headinfer.\n\n"
        "    sha256sum -c SHA256SUMS\n    zstd -dc images/tandemspec.tar.zst | docker load\n\n"
        "Running on sm_120 and AMX was never verified.\n"
    )
    _write(tree / "_docker" / "README.md", readme.encode())
