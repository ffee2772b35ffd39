"""The errors `vault restore docker` can end in: each one line naming the image and what to do, with its exit code.

They subclass the groups of `cloudvault.errors`, so the exit-code table stays the one there: a damaged or
mismatching image is integrity (5); a daemon, GPU, tag, disk or login problem is environment (6).
"""

from __future__ import annotations

from cloudvault.errors import EnvironmentProblem, IntegrityError, NotFound


class DaemonNoSpace(EnvironmentProblem):
    """the docker data root {root} has {free} free; loading {name} needs about {need} (the layers are unpacked
    there); free some space or move the data root"""


class TagConflict(EnvironmentProblem):
    """tag {tag} is held by image {holder}, not by {name} ({image}); pass --retag to move it to {name}, or
    `docker tag`/`docker rmi` it yourself"""


class GpuMismatch(EnvironmentProblem):
    """{name} has kernels for {archs} only ({source}); {gpu} is compute capability {cap} ({sm}), where it would
    fail with "no kernel image is available for execution"; use a GPU it was built for, or pass --ignore-gpu"""


class KernelMismatch(EnvironmentProblem):
    """{count} CUDA libraries of {name} hold no kernels for {gpu}, compute capability {cap} ({sm}): {libraries};
    they would fail with "no kernel image is available for execution"; rebuild them with TORCH_CUDA_ARCH_LIST
    including {cap}, or pass --ignore-gpu"""


class NoGpu(EnvironmentProblem):
    """no NVIDIA GPU found (nvidia-smi {why}) and --require-gpu was given; {name} is built for {archs}"""




class ArchiveHashMismatch(IntegrityError):
    """sha256 of {path} is {found}, but {sums} says {expected}; the daemon got a cut-off stream and loaded nothing"""


class ArchiveNotInSums(IntegrityError):
    """{sums} has no line for {path}, so it cannot be verified; add one (sha256sum) or fix the recipe's archive"""


class ArchiveDamaged(IntegrityError):
    """{path}: {detail}; the daemon got a cut-off stream and loaded nothing"""


class ImageMismatch(IntegrityError):
    """{what}; {action}"""



class ArchiveNotIndexed(NotFound):
    """{path} is not in the catalog of {entry}; index the mirror that holds it (`vault index MIRROR`)"""
