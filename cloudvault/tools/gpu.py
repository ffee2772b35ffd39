"""The local GPUs' compute capability, and whether a CUDA arch list holds kernels that run on it.

A build's arch list comes as torch writes it (`TORCH_CUDA_ARCH_LIST="8.0 9.0 12.0+PTX"`, `Hopper`) or as nvcc and
cuobjdump name targets (`sm_120`, `compute_90`, `sm_90a`). The rules are CUDA's: a cubin for X.y runs on X.z with
z >= y (same major only); PTX for X.y is JIT-compiled on any X'.y' >= X.y; an arch-specific target (`sm_90a`) runs
only on exactly that capability. Everything here is a pure function except `local_gpus`, which runs nvidia-smi.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cloudvault.documents import Document

QUERY = ["nvidia-smi", "--query-gpu=index,name,compute_cap,memory.used,memory.total", "--format=csv,noheader"]

# torch.utils.cpp_extension's named architectures
NAMED_ARCHES = {
    "kepler": "3.5+PTX", "maxwell": "5.0 5.2+PTX", "pascal": "6.0 6.1+PTX", "volta": "7.0+PTX",
    "turing": "7.5+PTX", "ampere": "8.0 8.6+PTX", "ada": "8.9+PTX", "hopper": "9.0+PTX",
}  # fmt: skip

_DOTTED = re.compile(r"(\d+)\.(\d+)([af]?)(\+ptx)?")
_NVCC = re.compile(r"(sm|compute|lto)_(\d+)([af]?)")


@dataclass(frozen=True, order=True)
class Arch:
    """One compiled target: a cubin (ptx=False) or PTX for capability major.minor; variant 'a' or 'f' or ''."""

    major: int
    minor: int
    ptx: bool = False
    variant: str = ""

    @property
    def cap(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def __str__(self) -> str:
        return f"{'compute' if self.ptx else 'sm'}_{self.major}{self.minor}{self.variant}"

    def runs_on(self, cap: tuple[int, int]) -> bool:
        if self.variant == "a":
            return cap == self.cap
        if self.ptx:
            return cap >= self.cap
        return cap[0] == self.major and cap[1] >= self.minor


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_cap: tuple[int, int]
    memory_used_mib: int | None
    memory_total_mib: int | None

    @property
    def cap_text(self) -> str:
        return format_cap(self.compute_cap)

    @property
    def sm(self) -> str:
        return f"sm_{self.compute_cap[0]}{self.compute_cap[1]}"


def parse_cap(text: str | tuple[int, int]) -> tuple[int, int]:
    """'9.0' -> (9, 0); '12.0' -> (12, 0); 'sm_120' -> (12, 0); a tuple passes through."""
    if isinstance(text, tuple):
        return text
    value = text.strip().lower()
    if m := re.fullmatch(r"(\d+)\.(\d+)", value):
        return (int(m[1]), int(m[2]))
    if m := re.fullmatch(r"(?:sm_|compute_)?(\d{2,3})", value):
        return _split_digits(m[1])
    raise ValueError(f"not a compute capability: {text!r}")


def format_cap(cap: tuple[int, int]) -> str:
    return f"{cap[0]}.{cap[1]}"


def _split_digits(digits: str) -> tuple[int, int]:
    # nvcc names put the minor in the last digit: 90 -> 9.0, 120 -> 12.0, 86 -> 8.6
    return (int(digits[:-1]), int(digits[-1]))


def parse_arch_list(text: str | Iterable[str]) -> list[Arch]:
    """Every target named in an arch list ('8.0 9.0 12.0+PTX', '8.0;9.0', 'sm_120,compute_120', 'Hopper').

    A target kept as both cubin and PTX ('12.0+PTX') yields two Archs. An unknown token is a ValueError."""
    tokens = re.split(r"[\s;,]+", text) if isinstance(text, str) else list(text)
    archs: list[Arch] = []
    for token in (t.strip().strip("\"'") for t in tokens):
        if not token:
            continue
        lower = token.lower()
        if lower in NAMED_ARCHES:
            archs.extend(parse_arch_list(NAMED_ARCHES[lower]))
        elif m := _DOTTED.fullmatch(lower):
            archs.append(Arch(int(m[1]), int(m[2]), False, m[3]))
            if m[4]:
                archs.append(Arch(int(m[1]), int(m[2]), True, m[3]))
        elif m := _NVCC.fullmatch(lower):
            major, minor = _split_digits(m[2])
            archs.append(Arch(major, minor, m[1] != "sm", m[3]))
        else:
            raise ValueError(f"not a CUDA arch: {token!r}")
    return sorted(set(archs))


def fits(arch_list: str | Iterable[str] | list[Arch] | None, compute_cap: str | tuple[int, int] | None) -> bool | None:
    """Whether anything in arch_list runs on a GPU of compute_cap; None when either is unknown (empty or None)."""
    if arch_list is None or compute_cap is None:
        return None
    archs = arch_list if _is_arch_list(arch_list) else parse_arch_list(arch_list)
    if not archs:
        return None
    cap = parse_cap(compute_cap)
    return any(arch.runs_on(cap) for arch in archs)


def _is_arch_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(a, Arch) for a in value)


@dataclass(frozen=True)
class GpuFit(Document):
    """Every local GPU against an arch list: the verdict (fits | mismatch | no_gpu | unknown), the list as nvcc
    names it ('' when unknown), where it came from, the GPUs looked at and those it cannot run on."""

    verdict: str
    archs: str
    source: str
    gpus: list[Gpu] = field(default_factory=list)
    misfits: list[Gpu] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "archs": self.archs, "source": self.source,
                "gpus": [{"index": g.index, "name": g.name, "compute_cap": g.cap_text} for g in self.gpus],
                "misfits": [g.index for g in self.misfits]}  # fmt: skip

    def misfit_line(self, what: str) -> str | None:
        """'WHAT is built for sm_89; GPU 0 (NVIDIA H200) is sm_90' for the first misfit, None when it fits."""
        if not self.misfits:
            return None
        g = self.misfits[0]
        return f"{what} is built for {self.archs}; GPU {g.index} ({g.name}) is {g.sm}"


def check_fit(arch_list: str | None, source: str, gpus: list[Gpu] | None) -> GpuFit:
    """The one fit check: each GPU against the arch list (pure: gpus come from local_gpus(), maybe filtered to
    those a run uses). An unreadable list is 'unknown', said in source."""
    try:
        archs = parse_arch_list(arch_list) if arch_list else []
    except ValueError as exc:
        archs, source = [], f"{source}, unreadable: {exc}"
    described = describe(archs) if archs else ""
    if not gpus:
        return GpuFit("no_gpu", described, source)
    if not archs:
        return GpuFit("unknown", described, source, list(gpus))
    misfits = [g for g in gpus if not fits(archs, g.compute_cap)]
    return GpuFit("mismatch" if misfits else "fits", described, source, list(gpus), misfits)


def describe(archs: Iterable[Arch]) -> str:
    """'sm_90 sm_120 compute_120' for messages."""
    return " ".join(str(a) for a in archs) or "none"


def parse_smi(text: str) -> list[Gpu]:
    """nvidia-smi's CSV ('0, NVIDIA H200, 9.0, 0 MiB, 143771 MiB' per line, units optional) as Gpus."""
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        used, total = (_mib(f) for f in (fields[3:5] + [None, None])[:2])
        gpus.append(Gpu(int(fields[0]), fields[1], parse_cap(fields[2]), used, total))
    return gpus


def _mib(field: str | None) -> int | None:
    m = re.match(r"(\d+)", field or "")
    return int(m[1]) if m else None


def local_gpus(run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> list[Gpu] | None:
    """This machine's GPUs by nvidia-smi; None when there is no nvidia-smi, it fails, or it reports no GPU."""
    if shutil.which(QUERY[0]) is None:
        return None
    try:
        done = run(QUERY, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        return parse_smi(done.stdout) or None
    except ValueError:
        return None
