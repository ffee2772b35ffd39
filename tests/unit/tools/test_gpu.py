"""GPU fit: arch lists as torch and nvcc write them, CUDA's compatibility rules, nvidia-smi's output."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudvault.tools import gpu
from cloudvault.tools.gpu import Arch


def test_torch_arch_list_with_ptx_yields_cubin_and_ptx():
    assert gpu.parse_arch_list("8.0 9.0 12.0+PTX") == [
        Arch(8, 0), Arch(9, 0), Arch(12, 0), Arch(12, 0, ptx=True),
    ]  # fmt: skip


def test_nvcc_names_separators_and_named_arches():
    assert gpu.parse_arch_list("sm_120;compute_120") == [Arch(12, 0), Arch(12, 0, True)]
    assert gpu.parse_arch_list("sm_86, sm_90a") == [Arch(8, 6), Arch(9, 0, False, "a")]
    assert gpu.parse_arch_list("Hopper") == [Arch(9, 0), Arch(9, 0, True)]
    assert gpu.parse_arch_list('"12.0"') == [Arch(12, 0)]
    assert gpu.parse_arch_list(["8.9", "sm_120"]) == [Arch(8, 9), Arch(12, 0)]


def test_unknown_arch_token_is_named():
    with pytest.raises(ValueError, match="'blackwellish'"):
        gpu.parse_arch_list("9.0 blackwellish")


def test_sm120_only_image_does_not_fit_h200_but_fits_rtx_pro_6000():
    assert gpu.fits("12.0", "9.0") is False
    assert gpu.fits("12.0", "12.0") is True
    assert gpu.fits("sm_120", (12, 0)) is True


def test_cubin_runs_forward_within_its_major_only():
    assert gpu.fits("8.0", "8.6") is True
    assert gpu.fits("8.6", "8.0") is False
    assert gpu.fits("9.0", "12.0") is False
    assert gpu.fits("12.0", "12.1") is True


def test_ptx_is_jit_compiled_on_any_newer_gpu_but_not_older():
    assert gpu.fits("9.0+PTX", "12.0") is True
    assert gpu.fits("compute_90", "12.0") is True
    assert gpu.fits("12.0+PTX", "9.0") is False


def test_arch_specific_targets_run_only_on_their_own_capability():
    assert gpu.fits("sm_90a", "9.0") is True
    assert gpu.fits("compute_90a", "10.0") is False
    assert gpu.fits("9.0a", "9.1") is False


def test_unknown_when_either_side_is_missing():
    assert gpu.fits(None, "9.0") is None
    assert gpu.fits("", "9.0") is None
    assert gpu.fits("12.0", None) is None


def test_parse_cap_forms():
    assert gpu.parse_cap("9.0") == (9, 0)
    assert gpu.parse_cap(" 12.0 ") == (12, 0)
    assert gpu.parse_cap("sm_120") == (12, 0)
    assert gpu.parse_cap("86") == (8, 6)
    with pytest.raises(ValueError):
        gpu.parse_cap("nine")


def test_describe_names_targets_as_nvcc_does():
    assert gpu.describe(gpu.parse_arch_list("9.0 12.0+PTX")) == "sm_90 sm_120 compute_120"
    assert gpu.describe([]) == "none"


def test_parse_smi_with_and_without_units():
    text = "0, NVIDIA H200, 9.0, 0 MiB, 143771 MiB\n1, NVIDIA RTX PRO 6000 Blackwell, 12.0, 512, 97887\n"
    first, second = gpu.parse_smi(text)
    assert first == gpu.Gpu(0, "NVIDIA H200", (9, 0), 0, 143771)
    assert (second.compute_cap, second.memory_used_mib, second.sm, second.cap_text) == ((12, 0), 512, "sm_120", "12.0")
    assert gpu.parse_smi("No devices were found\n") == []


@given(st.integers(1, 12), st.integers(0, 9), st.integers(1, 12), st.integers(0, 9), st.booleans())
def test_fits_agrees_with_cuda_rules(major, minor, gmajor, gminor, ptx):
    arch = f"{major}.{minor}" + ("+PTX" if ptx else "")
    expected = (gmajor, gminor) >= (major, minor) if ptx else (gmajor == major and gminor >= minor)
    if ptx:
        expected = expected or (gmajor == major and gminor >= minor)
    assert gpu.fits(arch, (gmajor, gminor)) is expected


def fake_smi(folder, body: str):
    path = folder / "nvidia-smi"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(folder)


def test_local_gpus_reads_a_fake_nvidia_smi_on_path(tmp_path, monkeypatch):
    folder = fake_smi(tmp_path, "echo '0, NVIDIA H200, 9.0, 3 MiB, 143771 MiB'")
    monkeypatch.setenv("PATH", folder + os.pathsep + os.environ["PATH"])
    assert gpu.local_gpus() == [gpu.Gpu(0, "NVIDIA H200", (9, 0), 3, 143771)]


def test_local_gpus_is_none_without_nvidia_smi_or_when_it_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert gpu.local_gpus() is None
    folder = fake_smi(tmp_path, "echo 'NVIDIA-SMI has failed' >&2; exit 9")
    monkeypatch.setenv("PATH", folder)
    assert gpu.local_gpus() is None
    assert gpu.local_gpus(run=lambda *a, **k: subprocess.CompletedProcess(a, 0, "", "")) is None


def test_the_one_fit_check_names_the_first_gpu_an_image_cannot_run_on():
    h200, pro6000 = gpu.Gpu(0, "NVIDIA H200", (9, 0), 0, 143_771), gpu.Gpu(1, "RTX PRO 6000", (12, 0), 0, 97_887)
    fit = gpu.check_fit("8.9", "arch_list in recipe neo", [h200, pro6000])
    assert fit.verdict == "mismatch" and [g.index for g in fit.misfits] == [0, 1]
    assert fit.misfit_line("image 'neo'") == "image 'neo' is built for sm_89; GPU 0 (NVIDIA H200) is sm_90"
    assert gpu.check_fit("9.0 12.0", "x", [h200, pro6000]).verdict == "fits"
    assert gpu.check_fit("8.0+PTX", "x", [h200]).verdict == "fits"  # PTX is JIT-compiled on a newer GPU
    assert gpu.check_fit(None, "recorded nowhere", [h200]).verdict == "unknown"
    assert gpu.check_fit("9.0", "x", None).verdict == "no_gpu"
    unreadable = gpu.check_fit("sm_ninety", "TORCH_CUDA_ARCH_LIST", [h200])
    assert unreadable.verdict == "unknown" and "unreadable" in unreadable.source


def test_an_image_arch_list_comes_from_its_config_before_its_recipe():
    from cloudvault.tools import cuda

    found = cuda.for_image({"TORCH_CUDA_ARCH_LIST": "12.0"}, {}, "8.9", "neo")
    assert (found.text, found.source) == ("12.0", "TORCH_CUDA_ARCH_LIST=12.0 in the image config")
    labelled = cuda.for_image({}, {"com.example.cuda-arch-list": "9.0"}, "8.9", "neo")
    assert (labelled.text, labelled.source) == ("9.0", "a label of the image config")
    assert cuda.for_image(None, None, "8.9", "neo").source == "arch_list in recipe neo"
    assert cuda.for_image({}, {}, None, "neo").text is None


def test_a_library_without_a_readable_fat_binary_is_listed_by_cuobjdump_when_it_is_installed(tmp_path, monkeypatch):
    from cloudvault.tools import cuda

    lib = tmp_path / "libswiftllm_c.so"
    lib.write_bytes(b"\x7fELF" + b"\0" * 200)  # no .nv_fatbin section vault can read
    monkeypatch.setattr(cuda, "cuobjdump", lambda: None)
    assert cuda.library_arch_list(str(lib)) is None
    tool = tmp_path / "cuobjdump"
    tool.write_text("#!/bin/sh\necho 'ELF file    1: lib.1.sm_89.cubin'\necho 'PTX file    1: lib.1.sm_89.ptx'\n")
    tool.chmod(0o755)
    monkeypatch.setattr(cuda, "cuobjdump", lambda: str(tool))
    found = cuda.library_arch_list(str(lib))
    assert (found.text, found.source) == ("sm_89 compute_89", "cuobjdump")
    assert gpu.check_fit(found.text, found.source, [gpu.Gpu(0, "RTX PRO 6000", (12, 0), 0, 0)]).verdict == "fits"
