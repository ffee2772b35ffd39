"""Build real test archives with GNU tar, zstd, pzstd and Python, and hash what GNU tar extracts."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import blake3
import zstandard

NON_UTF8 = b"caf\xe9_latin1.txt"
COMPRESSORS = {
    "zstd": ["zstd", "-q", "-c"],
    "zstd-T0": ["zstd", "-q", "-T0", "-c"],
    "zstd-long27": ["zstd", "-q", "--long=27", "-c"],
    "pzstd": ["pzstd", "-q", "-p", "2", "-c"],
}


def make_tree(root: Path, *, long_names: bool = True, non_utf8: bool = True, big: int = 3 << 20) -> Path:
    """Edge cases: long and unicode names, a non-UTF-8 name, links, an empty file, a member over one frame."""
    (root / "logs").mkdir(parents=True)
    (root / "logs/run.log").write_text("step 1\nstep 2\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "유니코드_결과.csv").write_text("a,b\n1,2\n")
    if long_names:
        deep = root / ("d" * 60) / ("e" * 60)
        deep.mkdir(parents=True)
        (deep / ("f" * 90 + ".json")).write_text('{"long": true}')
        (deep / ("g" * 140 + ".txt")).write_text("longer than 255 in all")
    if non_utf8:
        with open(os.path.join(os.fsencode(root), NON_UTF8), "wb") as fh:
            fh.write(b"latin-1 named\n")
    (root / "dumps").mkdir()
    data = bytes(range(256)) * (big // 256)
    (root / "dumps/big.bin").write_bytes(os.urandom(big // 2) + data[: big // 2])
    os.symlink("logs/run.log", root / "link_to_log")
    os.link(root / "logs/run.log", root / "hardlink_to_log")
    return root


def gnu_tar(src: Path, out_tar: Path, fmt: str) -> None:
    subprocess.run(["tar", f"--format={fmt}", "-C", str(src), "-cf", str(out_tar), "."], check=True)


def compress(tar_path: Path, out: Path, how: str) -> Path:
    if how == "python":
        cctx = zstandard.ZstdCompressor(write_checksum=True)
        data = tar_path.read_bytes()
        with open(out, "wb") as fh:
            for i in range(0, len(data), 1 << 20):
                fh.write(cctx.compress(data[i : i + (1 << 20)]))
        return out
    with open(tar_path, "rb") as src, open(out, "wb") as dst:
        subprocess.run(COMPRESSORS[how], stdin=src, stdout=dst, check=True)
    return out


def python_tar(src: Path, out_tar: Path) -> None:
    with tarfile.open(out_tar, "w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(src, arcname=".")


def extracted_hashes(archive: Path, dest: Path) -> dict[bytes, str]:
    """BLAKE3 of every regular file GNU tar extracts, by raw relative path (./ removed)."""
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-I", "zstd --long=31", "-C", str(dest), "-xf", str(archive)], check=True)
    out = {}
    base = os.fsencode(dest)
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                continue
            with open(full, "rb") as fh:
                out[os.path.relpath(full, base)] = blake3.blake3(fh.read()).hexdigest()
    return out


def hostile_archive(path: Path, files: tuple[str, ...], links: tuple[tuple[str, str, bytes], ...] = ()) -> Path:
    """A GNU-format .tar.zst (made by Python) holding files with the given names ('../x', '/etc/x' ...) and
    links given as (name, target, tarfile type)."""
    import io

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in files:
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"bad"))
        for name, target, kind in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            tar.addfile(info)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))
    return path


def three_frame_mirror(root: Path, work: Path, how: str = "pzstd") -> Path:
    """A mirror with one entry, exp02: notes.txt and data.tar.zst, 28 files (640 KB each, half random) in a GNU
    tar that pzstd cut into three frames (8 MiB, 8 MiB and the rest); or compressed `how` (zstd: one frame,
    python: a frame per MiB). The archive's mtime is fixed."""
    import random

    rng = random.Random(2)
    src = work / "exp02-src"
    src.mkdir(parents=True)
    for i in range(28):
        (src / f"f{i:02d}.bin").write_bytes(rng.randbytes(320_000) + bytes(320_000))
    entry = root / "exp02"
    entry.mkdir(parents=True)
    (entry / "notes.txt").write_text("run 2: loss 0.31\n")
    gnu_tar(src, work / "exp02.tar", "gnu")
    compress(work / "exp02.tar", entry / "data.tar.zst", how)
    os.utime(entry / "data.tar.zst", (1_700_000_000, 1_700_000_000))
    return root


def flip_byte(path: Path, offset: int) -> None:
    """One bit of path flipped, its size and mtime kept (`touch -r` of a copy made before): bit rot."""
    keep = path.with_name(path.name + ".stamp")
    subprocess.run(["touch", "-r", str(path), str(keep)], check=True)
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0x01]))  # text stays text
    subprocess.run(["touch", "-r", str(keep), str(path)], check=True)
    keep.unlink()


def assert_same_tree(ref: Path, out: Path) -> None:
    """Every file and symlink another tool extracted into ref is in out alike: bytes, mode, whole-second mtime,
    link target."""
    for path in ref.rglob("*"):
        mine = out / path.relative_to(ref)
        if path.is_symlink():
            assert os.readlink(mine) == os.readlink(path), path
        elif path.is_file():
            assert mine.read_bytes() == path.read_bytes(), path
            assert (mine.stat().st_mode & 0o777) == (path.stat().st_mode & 0o777), path
            assert int(mine.stat().st_mtime) == int(path.stat().st_mtime), path
