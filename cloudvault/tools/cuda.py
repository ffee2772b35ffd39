"""Where a build's CUDA arch list is found: an image's env or labels, a recipe's `arch_list`, or cuobjdump's listing
of a fat binary. Every caller that needs "what was this built for" asks here; `tools.gpu` decides whether it fits.
"""

from __future__ import annotations

import re
import shutil
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
