"""Whether an image can run on this machine's GPUs: its CUDA arch list (image config, else recipe) against them."""

from __future__ import annotations

from dataclasses import dataclass, field

from cloudvault import gpu
from cloudvault.errors import VaultError
from cloudvault.restore.docker_errors import GpuMismatch, NoGpu
from cloudvault.restore.docker_source import DockerRecipe
from cloudvault.restore.oci import ImageConfig


@dataclass
class GpuFit:
    verdict: str  # fits | mismatch | no_gpu | unknown
    archs: str  # as nvcc names them, or '' when unknown
    source: str  # where the arch list came from
    gpus: list[gpu.Gpu] = field(default_factory=list)
    misfits: list[gpu.Gpu] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "archs": self.archs, "source": self.source,
                "gpus": [{"index": g.index, "name": g.name, "compute_cap": g.cap_text} for g in self.gpus],
                "misfits": [g.index for g in self.misfits]}  # fmt: skip


def arch_source(recipe: DockerRecipe, config: ImageConfig | None) -> tuple[str | None, str]:
    """The image's arch list and where it was found: its config first, else the recipe."""
    if config is not None and config.arch_list:
        key = next((k for k in ("TORCH_CUDA_ARCH_LIST", "CUDA_ARCH_LIST", "CUDAARCHS") if config.env.get(k)), None)
        where = f"{key}={config.arch_list} in the image config" if key else "a label of the image config"
        return config.arch_list, where
    if recipe.arch_list:
        return recipe.arch_list, f"arch_list in recipe {recipe.name}"
    return None, "recorded nowhere"


def gpu_fit(arch_list: str | None, source: str, gpus: list[gpu.Gpu] | None) -> GpuFit:
    """Every local GPU against the arch list (pure: gpus come from gpu.local_gpus())."""
    try:
        archs = gpu.parse_arch_list(arch_list) if arch_list else []
    except ValueError as exc:
        archs, source = [], f"{source}, unreadable: {exc}"
    described = gpu.describe(archs) if archs else ""
    if not gpus:
        return GpuFit("no_gpu", described, source)
    if not archs:
        return GpuFit("unknown", described, source, gpus)
    misfits = [g for g in gpus if not gpu.fits(archs, g.compute_cap)]
    return GpuFit("mismatch" if misfits else "fits", described, source, gpus, misfits)


def gpu_problem(name: str, fit: GpuFit, *, require_gpu: bool, ignore_gpu: bool) -> VaultError | None:
    """The error a fit is, given the flags (None: go on)."""
    if fit.verdict == "mismatch" and not ignore_gpu:
        g = fit.misfits[0]
        return GpuMismatch(name=name, archs=fit.archs, source=fit.source, gpu=f"GPU {g.index} ({g.name})",
                           cap=g.cap_text, sm=g.sm)  # fmt: skip
    if fit.verdict == "no_gpu" and require_gpu:
        why = "not found" if _no_smi() else "reports no GPU"
        return NoGpu(why=why, name=name, archs=fit.archs or "an unknown arch list")
    return None


def _no_smi() -> bool:
    import shutil

    return shutil.which("nvidia-smi") is None
