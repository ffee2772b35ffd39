"""What an env archive says about itself: conda-meta records, pip RECORDs, python and torch builds, GPU fit.

Everything here parses names or small documents already in hand (member paths, conda-meta JSON, torch/version.py),
so `--list` and `--dry-run` answer from the catalog and conda-meta alone.
"""

from __future__ import annotations

import base64
import re
from collections import namedtuple
from dataclasses import dataclass

from cloudvault import readers
from cloudvault.documents import Document

# One file as conda recorded it in conda-meta/<pkg>.json paths_data.
CondaPath = namedtuple("CondaPath", "package file_mode placeholder sha256_in_prefix sha256 size")

_DIST_INFO = re.compile(r"(?:^|/)site-packages/torch-([^/]+?)\.dist-info(?:/|$)")
_CONDA_TORCH = re.compile(r"(?:^|/)conda-meta/pytorch-(\d[^-]*)-([^/]+)\.json$")
_CONDA_PYTHON = re.compile(r"(?:^|/)conda-meta/python-(\d[^-]*)-[^/]+\.json$")
_LIB_PYTHON = re.compile(r"(?:^|/)lib/python(\d+\.\d+)/")
_CU_TAG = re.compile(r"\+cu(\d+)(\d)$")
_CUDA_BUILD = re.compile(r"cuda(\d+)\.(\d+)")
# pip's CUDA runtime wheel says which CUDA a PyPI torch (whose dist-info name has no +cuXYZ) was built for
_NV_RUNTIME = re.compile(r"(?:^|/)site-packages/nvidia_cuda_runtime(?:_cu\d+)?-(\d+)\.(\d+)[^/]*\.dist-info(?:/|$)")
# torch's release wheels: every CUDA build before 12.8 stops at Hopper (sm_90); 12.8 added Blackwell.
ARCHES_BEFORE_CU128 = "5.0 6.0 7.0 7.5 8.0 8.6 9.0"
ARCHES_FROM_CU128 = "7.5 8.0 8.6 9.0 10.0 12.0+PTX"


CONDA_RECORD = {"name": str, "files": list, "paths_data": dict}
CONDA_PATH = {"required": ("_path",), "_path": str, "file_mode": (str, type(None)),
              "prefix_placeholder": (str, type(None)), "sha256_in_prefix": (str, type(None)),
              "sha256": (str, type(None)), "size_in_bytes": (int, type(None))}  # fmt: skip


def conda_paths(documents: dict[str, bytes]) -> dict[str, CondaPath]:
    """rel path -> CondaPath from conda-meta JSON documents (name -> bytes); files without paths_data still
    count through their `files` list. A document, or a path record, not of conda's shape (not JSON, a list where
    conda writes an object) records nothing vault can check: it is passed over, as a file conda-meta does not
    name is (its bytes are still checked against the catalog's BLAKE3)."""
    out: dict[str, CondaPath] = {}
    for name, raw in documents.items():
        try:
            doc = readers.json_document(raw, name, CONDA_RECORD)
        except readers.DamagedFile:
            continue
        package = doc.get("name") or name.rsplit("/", 1)[-1].removesuffix(".json")
        for rel in doc.get("files") or []:
            if isinstance(rel, str):
                out.setdefault(rel, CondaPath(package, None, None, None, None, None))
        paths = (doc.get("paths_data") or {}).get("paths") or []
        for p in paths if isinstance(paths, list) else []:
            try:
                readers.check_shape(p, CONDA_PATH, name)
            except readers.DamagedFile:
                continue
            fields = ("file_mode", "prefix_placeholder", "sha256_in_prefix", "sha256", "size_in_bytes")
            out[p["_path"]] = CondaPath(package, *(p.get(f) for f in fields))
    return out


def record_hashes(record: bytes, site_dir: str) -> dict[str, str]:
    """env-relative path -> sha256 hex from a pip RECORD (paths relative to site-packages, `../../../bin/x`). A
    RECORD that is not CSV (a field past the csv module's limit) records nothing vault can check: it is passed
    over, as a damaged conda-meta record is."""
    import csv
    import io
    import posixpath

    out = {}
    try:
        rows = list(csv.reader(io.StringIO(record.decode("utf-8", "replace"))))
    except csv.Error:
        return {}
    for row in rows:
        if len(row) < 2 or not row[1].startswith("sha256="):
            continue
        digest = row[1][len("sha256=") :]
        try:
            raw = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4))
        except ValueError:
            continue
        out[posixpath.normpath(posixpath.join(site_dir, row[0]))] = raw.hex()
    return out


def python_version(paths: list[str]) -> str | None:
    for pattern in (_CONDA_PYTHON, _LIB_PYTHON):
        found = sorted({m[1] for p in paths if (m := pattern.search(p))})
        if found:
            return found[-1]
    return None


def torch_build(paths: list[str]) -> dict | None:
    """{'version', 'cuda'} of the env's torch from its dist-info folder or conda-meta name, or None."""
    runtime = next((f"{m[1]}.{m[2]}" for p in paths if (m := _NV_RUNTIME.search(p))), None)
    for p in paths:
        if m := _DIST_INFO.search(p):
            version = m[1]
            cu = _CU_TAG.search(version)
            cuda = f"{cu[1]}.{cu[2]}" if cu else ("cpu" if version.endswith("+cpu") else runtime)
            return {"version": version, "cuda": cuda, "from": "dist-info"}
        if m := _CONDA_TORCH.search(p):
            cu = _CUDA_BUILD.search(m[2])
            return {"version": m[1], "cuda": f"{cu[1]}.{cu[2]}" if cu else ("cpu" if "cpu" in m[2] else None),
                    "from": "conda-meta"}  # fmt: skip
    return None


def torch_version_file(text: str) -> dict:
    """torch/version.py's __version__ and cuda (None for a CPU build)."""
    version = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)", text, re.M)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:['\"]([^'\"]+)['\"]|None)", text, re.M)
    return {"version": version[1] if version else None, "cuda": cuda[1] if cuda else None, "from": "version.py"}


def arch_list_for(cuda: str | None) -> str | None:
    """The arch list torch's release wheels carry for a CUDA version ('12.1' -> up to sm_90); None if unknown."""
    if not cuda or cuda == "cpu":
        return None
    try:
        major, minor = (int(x) for x in cuda.split(".")[:2])
    except ValueError:
        return None
    return ARCHES_FROM_CU128 if (major, minor) >= (12, 8) else ARCHES_BEFORE_CU128


@dataclass(frozen=True)
class TorchGpuFit(Document):
    """A torch build's kernels against sm_120 (RTX PRO 6000) and each local GPU: its arch list, where that came
    from, compute capability -> whether it has kernels there, and a note for each it has none for."""

    arches: str
    arches_from: str
    fits: dict[str, bool | None]
    notes: tuple[str, ...]


def gpu_fit(
    torch: dict | None, arch_text: str | None = None, local_caps: list | None = None, source: str | None = None
) -> TorchGpuFit | None:
    """Whether the torch build has kernels for sm_120 (RTX PRO 6000) and for each local GPU, said plainly.
    arch_text: the build's arch list as read from its libraries (source says how); None infers it from CUDA."""
    from cloudvault.tools import gpu

    if not torch or torch.get("cuda") in (None, "cpu"):
        return None
    source = (source or "its libraries") if arch_text else f"torch release wheels for CUDA {torch['cuda']}"
    arch_text = arch_text or arch_list_for(torch["cuda"])
    if arch_text is None:
        return None
    archs = gpu.parse_arch_list(arch_text)
    caps = {"12.0": (12, 0)} | {gpu.format_cap(c): c for c in (local_caps or [])}
    fit = {cap: gpu.fits(archs, c) for cap, c in caps.items()}
    notes = tuple(
        f"torch {torch['version']} (CUDA {torch['cuda']}) has no kernels for compute capability {cap} "
        f"(sm_{cap.replace('.', '')}): it cannot run there; install a torch built for it (cu128 or later for sm_120)"
        for cap, ok in fit.items()
        if ok is False
    )
    return TorchGpuFit(gpu.describe(archs), source, fit, notes)
