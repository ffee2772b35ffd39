"""Where a build's CUDA arch list is found: an image's env or labels, a recipe's `arch_list`, a library's fat
binaries (read directly from its .nv_fatbin section, or listed by cuobjdump). Every caller that needs "what was
this built for" asks here; `tools.gpu` decides whether it fits."""

from __future__ import annotations

import mmap
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass

from cloudvault.tools.gpu import Arch

ARCH_ENV = ("TORCH_CUDA_ARCH_LIST", "CUDA_ARCH_LIST", "CUDAARCHS")  # torch's, then CMake's names for it
CUOBJDUMP_HINT = "it comes with the CUDA toolkit (package cuda-cuobjdump)"
_ELF = re.compile(r"^ELF file\s+\d+:.*?\bsm_(\d+)([af]?)\b")
_PTX = re.compile(r"^PTX file\s+\d+:.*?\b(?:sm|compute)_(\d+)([af]?)\b")


@dataclass(frozen=True)
class ArchList:
    """An arch list as written where it was found (None: recorded nowhere), and a phrase saying where."""

    text: str | None
    source: str


def from_environment(env: dict[str, str], labels: dict[str, str] | None = None) -> ArchList | None:
    """The arch list an image config (or any environment) records: TORCH_CUDA_ARCH_LIST and kin, else a label
    naming one (`org.opencontainers...cuda_arch_list`); None when it records none."""
    for key in ARCH_ENV:
        if env.get(key):
            return ArchList(env[key], f"{key}={env[key]} in the image config")
    for key, value in sorted((labels or {}).items()):
        if value and key.lower().replace("-", "_").endswith(("cuda_arch_list", "cuda_archs")):
            return ArchList(value, "a label of the image config")
    return None


def for_image(
    env: dict[str, str] | None, labels: dict[str, str] | None, recipe_arch_list: str | None, recipe_name: str
) -> ArchList:
    """An image's arch list: its config first (what was built), else its docker recipe's `arch_list`."""
    found = from_environment(env or {}, labels) if env is not None or labels else None
    if found is not None:
        return found
    if recipe_arch_list:
        return ArchList(recipe_arch_list, f"arch_list in recipe {recipe_name}")
    return ArchList(None, "recorded nowhere")


def library_arch_list(path: str) -> ArchList | None:
    """A shared library's arch list: its fat binaries read directly (no CUDA toolkit needed), else cuobjdump's
    listing when cuobjdump is installed; None when neither finds device code."""
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        text = main_arches(fatbin_arches(buf))
    if text:
        return ArchList(text, f"{path.rsplit('/', 1)[-1]} fat binaries")
    tool = cuobjdump()
    archs = listed_archs(path, tool) if tool else []
    return ArchList(" ".join(str(a) for a in archs), "cuobjdump") if archs else None


def parse_cuobjdump(text: str) -> list[Arch]:
    """`cuobjdump --list-elf --list-ptx` lines ('ELF file 1: lib.1.sm_90.cubin', 'PTX file 1: lib.1.sm_90.ptx')."""
    archs = set()
    for line in text.splitlines():
        for pattern, ptx in ((_ELF, False), (_PTX, True)):
            if m := pattern.match(line.strip()):
                archs.add(Arch(int(m[1][:-1]), int(m[1][-1]), ptx, m[2]))
    return sorted(archs)


def cuobjdump() -> str | None:
    """The cuobjdump on PATH, or None."""
    return shutil.which("cuobjdump")


def listed_archs(path: str, tool: str) -> list[Arch]:
    """The targets a library's fat binaries hold, as cuobjdump lists them (cubins and PTX)."""
    done = subprocess.run([tool, "--list-elf", "--list-ptx", path], capture_output=True, text=True, check=False)
    return parse_cuobjdump(done.stdout)


FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian: a CUDA fat binary container
FATBIN_PTX, FATBIN_CUBIN = 1, 2


def _section(buf, name: bytes) -> tuple[int, int] | None:
    """(file offset, size) of the named section of a 64-bit little-endian ELF, or None."""
    if len(buf) < 64 or bytes(buf[:6]) != b"\x7fELF\x02\x01":
        return None
    (shoff,) = struct.unpack_from("<Q", buf, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", buf, 58)
    if not shoff or shstrndx >= shnum or shoff + shnum * shentsize > len(buf):
        return None
    (names_at,) = struct.unpack_from("<Q", buf, shoff + shstrndx * shentsize + 24)
    for i in range(shnum):
        (name_index,) = struct.unpack_from("<I", buf, shoff + i * shentsize)
        offset, size = struct.unpack_from("<QQ", buf, shoff + i * shentsize + 24)
        end = buf.find(b"\0", names_at + name_index)
        if bytes(buf[names_at + name_index : end]) == name:
            return offset, size
    return None


def fatbin_arches(buf) -> dict[str, int]:
    """'sm_90' / 'compute_90' -> how many of the library's fat binaries carry it, read from its .nv_fatbin section
    (what `cuobjdump --list-elf/--list-ptx` lists, without needing the CUDA toolkit)."""
    where = _section(buf, b".nv_fatbin")
    if where is None:
        return {}
    counts: dict[str, int] = {}
    at, end = where[0], where[0] + where[1]
    while (at := buf.find(FATBIN_MAGIC, at, end)) >= 0:
        _magic, _version, header, size = struct.unpack_from("<IHHQ", buf, at)
        entry, stop = at + header, min(at + header + size, end)
        while entry + 32 <= stop:
            kind, _v, entry_header, padded = struct.unpack_from("<HHII", buf, entry)
            (sm,) = struct.unpack_from("<I", buf, entry + 28)
            if kind in (FATBIN_PTX, FATBIN_CUBIN) and 10 <= sm < 1000:
                name = f"{'sm' if kind == FATBIN_CUBIN else 'compute'}_{sm}"
                counts[name] = counts.get(name, 0) + 1
            if not entry_header:
                break
            entry += entry_header + padded
        at = max(stop, at + 4)
    return counts


def main_arches(counts: dict[str, int]) -> str | None:
    """The arch list most kernels carry ('sm_80 sm_90 sm_120'): targets in at least half as many fat binaries as
    the commonest, so a handful of special kernels (sm_121) do not make a GPU look supported."""
    if not counts:
        return None
    floor = max(counts.values()) / 2
    return " ".join(sorted((a for a, n in counts.items() if n >= floor), key=lambda a: (int(a.split("_")[1]), a)))
