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


def unzip_hash(archive: Path, name: bytes, tool: str = "unzip") -> str:
    """BLAKE3 of the bytes `unzip -p` (or `bsdtar -xOf`: Info-ZIP unzip 6 has no LZMA) gives for a member."""
    from conftest import require  # the tool is this test's truth: missing, it skips (CI: fails), never errors

    pattern = name.replace(b"\\", b"\\\\").replace(b"[", b"[[]") if tool == "unzip" else name
    command = [b"unzip", b"-p"] if tool == "unzip" else [os.fsencode(require("bsdtar")), b"-xOf"]
    done = subprocess.run([*command, os.fsencode(archive), pattern], capture_output=True)
    assert done.returncode in (0, 1), done.stderr  # unzip's 1: a warning (bytes before the zip), the data given
    return blake3.blake3(done.stdout).hexdigest()


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


def hand_zip(out: Path, members: list[dict]) -> Path:
    """A zip written byte by byte, for what no tool writes on purpose. Each member: name, data, and optionally
    method (0, 8, 93), local_name and local_size (its local header's), size and crc (as declared), unix_mode, at (the
    index of an earlier member whose local record this central record points at: overlapping entries)."""
    import struct
    import zlib

    body, central, records = bytearray(), bytearray(), []
    for m in members:
        name, data, method = m["name"], m["data"], m.get("method", 0)
        crc, size = m.get("crc", zlib.crc32(data)), m.get("size", len(data))
        local_size = m.get("local_size", size)
        if "at" in m:
            offset, comp = records[m["at"]]
        else:
            comp = _compressed(data, method)
            offset = len(body)
            local = m.get("local_name", name)
            body += struct.pack("<4sHHHHHLLLHH", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(comp), local_size,
                                len(local), 0) + local + comp  # fmt: skip
        records.append((offset, comp))
        external = m.get("unix_mode", 0o100644) << 16
        central += struct.pack("<4sHHHHHHLLLHHHHHLL", b"PK\x01\x02", 0x031E, 20, 0, method, 0, 0x21, crc, len(comp),
                               size, len(name), 0, 0, 0, 0, external, offset) + name  # fmt: skip
    n = len(members)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n, n, len(central), len(body), 0)
    out.write_bytes(bytes(body + central + end))
    return out


def _compressed(data: bytes, method: int) -> bytes:
    import zlib

    if method == 8:
        d = zlib.compressobj(9, zlib.DEFLATED, -15)
        return d.compress(data) + d.flush()
    if method == 93:
        return zstandard.ZstdCompressor().compress(data)
    return data


def sparse_zip64(out: Path, size: int) -> Path:
    """A stored zip64 member of size zero bytes (past 4 GiB: its data a hole of a sparse file), written by hand
    as zip64 says (the local and central records' 0xFFFFFFFF sizes, their zip64 extra fields, the zip64 end)."""
    import struct
    import zlib

    crc, zeros = 0, bytes(1 << 24)
    for at in range(0, size, len(zeros)):
        crc = zlib.crc32(zeros[: min(len(zeros), size - at)], crc)
    name = b"huge.bin"
    local_extra = struct.pack("<HHQQ", 1, 16, size, size)
    local = struct.pack("<4sHHHHHLLLHH", b"PK\x03\x04", 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(name),
                        len(local_extra)) + name + local_extra  # fmt: skip
    central_extra = struct.pack("<HHQQ", 1, 16, size, size)
    central = struct.pack("<4sHHHHHHLLLHHHHHLL", b"PK\x01\x02", 0x032D, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF,
                          0xFFFFFFFF, len(name), len(central_extra), 0, 0, 0, 0o100644 << 16, 0)  # fmt: skip
    central += name + central_extra
    cd_at = len(local) + size
    end64_at = cd_at + len(central)
    end64 = struct.pack("<4sQHHLLQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, 1, 1, len(central), cd_at)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, end64_at, 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(out, "wb") as fh:
        fh.write(local)
        fh.seek(cd_at)
        fh.write(central + end64 + locator + end)
    return out


def partly_encrypted_zip(src: Path, out: Path, encrypted_first: bool = True) -> Path:
    """Info-ZIP `zip -P pw` of secret.txt and key.txt, and plain `zip` of plain.txt, into one zip (the encrypted
    members added first, or last): a zip only part of which is encrypted."""
    src.mkdir(parents=True, exist_ok=True)
    (src / "secret.txt").write_text("hidden\n")
    (src / "key.txt").write_text("also hidden\n")
    (src / "plain.txt").write_text("for everyone\n")
    encrypted = ["zip", "-q", "-P", "pw", str(out.resolve()), "secret.txt", "key.txt"]
    plain = ["zip", "-q", str(out.resolve()), "plain.txt"]
    for command in (encrypted, plain) if encrypted_first else (plain, encrypted):
        subprocess.run(command, cwd=src, check=True)
    return out


def with_methods(archive: Path, methods: dict[str, int]) -> Path:
    """A zip (Python zipfile's, stored) whose named members' method field, in their local header and their central
    record alike, says another method: what a Deflate64, PPMd or AES member is to a reader that has none of them."""
    import struct

    data = bytearray(archive.read_bytes())
    end = data.rfind(b"PK\x05\x06")
    count, _, at = struct.unpack_from("<HLL", data, end + 10)
    for _ in range(count):
        n, m, k = struct.unpack_from("<HHH", data, at + 28)
        name = bytes(data[at + 46 : at + 46 + n]).decode()
        if name in methods:
            (local,) = struct.unpack_from("<L", data, at + 42)
            struct.pack_into("<H", data, at + 10, methods[name])
            struct.pack_into("<H", data, local + 8, methods[name])
        at += 46 + n + m + k
    archive.write_bytes(bytes(data))
    return archive
