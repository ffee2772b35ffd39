"""Build real zip archives (Info-ZIP `zip`, Python's zipfile, a wheel, a .conda) and read their truth with unzip."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

import blake3
import zstandard


def zip_tree(root: Path) -> Path:
    """Edge cases a zip holds: nested folders, an empty file, a unicode name, a symlink, a member over 1 MiB."""
    (root / "logs").mkdir(parents=True)
    (root / "logs/run.log").write_text("step 1\nstep 2\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "유니코드_결과.csv").write_text("a,b\n1,2\n")
    (root / "dumps").mkdir()
    (root / "dumps/big.bin").write_bytes(os.urandom(1 << 20) + bytes(range(256)) * (5 << 12))
    os.chmod(root / "logs/run.log", 0o640)
    os.symlink("logs/run.log", root / "link_to_log")
    return root


def info_zip(src: Path, out: Path, *flags: str) -> Path:
    """`zip -r -y` (symlinks stored as links) of src's contents."""
    subprocess.run(["zip", "-q", "-r", "-y", *flags, str(out.resolve()), "."], cwd=src, check=True)
    return out


def unzip_names(archive: Path) -> list[bytes]:
    """Member names as `unzip -Z1` lists them (bytes, in central directory order)."""
    out = subprocess.run(["unzip", "-Z1", str(archive)], capture_output=True, check=True).stdout
    return out.splitlines()


def unzip_hash(archive: Path, name: bytes) -> str:
    """BLAKE3 of the bytes `unzip -p` gives for a member (the name as a glob-escaped pattern)."""
    pattern = name.replace(b"[", b"[[]")
    data = subprocess.run([b"unzip", b"-p", os.fsencode(archive), pattern], capture_output=True, check=True).stdout
    return blake3.blake3(data).hexdigest()


def python_zip(out: Path, members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(out, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out


def tar_zst(files: dict[str, bytes]) -> bytes:
    """A .tar.zst (one zstd frame) of files, as conda-package-handling writes info-*/pkg-* streams."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            tar.addfile(info, io.BytesIO(data))
    return zstandard.ZstdCompressor(level=3, write_checksum=True).compress(buf.getvalue())


def conda_package(out: Path, name: str, pkg: dict[str, bytes], info: dict[str, bytes]) -> Path:
    """A .conda built the way conda-package-handling builds one: a stored zip of metadata.json, then the
    info-<name>.tar.zst and pkg-<name>.tar.zst streams."""
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
        zf.writestr(f"pkg-{name}.tar.zst", tar_zst(pkg))
        zf.writestr(f"info-{name}.tar.zst", tar_zst(info))
    return out
