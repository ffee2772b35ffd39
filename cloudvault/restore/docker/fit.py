"""Whether an image can run on this machine's GPUs, as `vault restore docker` decides it: the image's arch list
(tools.cuda: its config, else the recipe) through the one fit check (tools.gpu), and the error a misfit is."""

from __future__ import annotations

import shutil

from cloudvault.errors import VaultError
from cloudvault.restore.docker.errors import GpuMismatch, NoGpu
from cloudvault.restore.docker.oci import ImageConfig
from cloudvault.restore.docker.source import DockerRecipe
from cloudvault.tools import cuda
from cloudvault.tools.gpu import GpuFit


def arch_source(recipe: DockerRecipe, config: ImageConfig | None) -> tuple[str | None, str]:
    """The image's arch list and where it was found: its config first, else the recipe."""
    found = cuda.for_image(config.env if config else None, config.labels if config else None, recipe.arch_list,
                           recipe.name)  # fmt: skip
    return found.text, found.source


def gpu_problem(name: str, fit: GpuFit, *, require_gpu: bool, ignore_gpu: bool) -> VaultError | None:
    """The error a fit is, given the flags (None: go on)."""
    if fit.verdict == "mismatch" and not ignore_gpu:
        g = fit.misfits[0]
        return GpuMismatch(name=name, archs=fit.archs, source=fit.source, gpu=f"GPU {g.index} ({g.name})",
                           cap=g.cap_text, sm=g.sm)  # fmt: skip
    if fit.verdict == "no_gpu" and require_gpu:
        why = "not found" if shutil.which("nvidia-smi") is None else "reports no GPU"
        return NoGpu(why=why, name=name, archs=fit.archs or "an unknown arch list")
    return None
