"""The pure parts of `vault restore env`: prefix rewriting, NUL-padded patches, ELF run paths, conda-meta, pip
RECORD and torch-build parsing, GPU fit."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess

import pytest
from conftest import require
from hypothesis import given
from hypothesis import strategies as st

from cloudvault.restore.env import elf
from cloudvault.restore.env import meta as env_meta
from cloudvault.restore.env.prefix import PrefixScanner, fix_shebang, patch_binary, rewrite_text
from cloudvault.tools import cuda

OLD = b"/mnt/filesystem-h8/miniforge3/envs/neo"


def test_text_rewrite_replaces_whole_prefixes_only():
    data = OLD + b"/bin/python\n" + OLD + b"2/bin/python\n" + OLD + b"\n" + OLD + b'":\n'
    out = rewrite_text(data, OLD, b"/e")
    assert out == b"/e/bin/python\n" + OLD + b'2/bin/python\n/e\n/e":\n'


def test_long_python_shebang_becomes_the_sh_trampoline_and_short_ones_stay():
    new = b"/" + b"p" * 140
    out = rewrite_text(b"#!" + OLD + b"/bin/python3.11 -E\nimport sys\n", OLD, new)
    assert out == b"#!/bin/sh\n'''exec' \"" + new + b'/bin/python3.11" -E "$0" "$@"\n' + b"' '''\nimport sys\n"
    assert rewrite_text(b"#!" + OLD + b"/bin/python\nx\n", OLD, b"/e") == b"#!/e/bin/python\nx\n"
    spaced = fix_shebang(b"#!/my envs/x/bin/python\nx\n", b"/my envs/x")
    assert spaced.startswith(b"#!/bin/sh\n'''exec' \"/my envs/x/bin/python\"")


def test_long_shebang_of_another_interpreter_is_left_for_the_unpatched_list():
    new = b"/" + b"p" * 140
    assert rewrite_text(b"#!" + OLD + b"/bin/perl\n", OLD, new) == b"#!" + new + b"/bin/perl\n"


def test_trampoline_runs_under_sh_and_python(tmp_path):
    env = tmp_path / "my envs" / "x"  # a space in the prefix: the kernel cannot run it as a #! line
    (env / "bin").mkdir(parents=True)
    (env / "bin/python").symlink_to(shutil.which("python3"))
    script = env / "bin/tool"
    body = f"#!{env}/bin/python\nimport sys\nprint('ok', sys.argv[1:])\n".encode()
    script.write_bytes(fix_shebang(body, str(env).encode()))
    script.chmod(0o755)
    assert script.read_bytes().startswith(b"#!/bin/sh\n")
    out = subprocess.run([str(script), "a b"], capture_output=True, text=True, check=True).stdout
    assert out == "ok ['a b']\n"


def test_binary_patch_pads_with_nuls_and_uses_the_placeholder_room():
    padding = 200 - len(OLD)
    blob = b"\x7fELF\0" + OLD + b"/lib\0" + b"\0" * padding + b"\x01tail"
    shorter = bytearray(blob)
    assert patch_binary(shorter, OLD, b"/e") == (1, [])
    assert bytes(shorter) == b"\x7fELF\0/e/lib" + b"\0" * (len(OLD) - 2 + 1 + padding) + b"\x01tail"
    longer, new = bytearray(blob), b"/" + b"q" * 150
    assert patch_binary(longer, OLD, new, room=200) == (1, [])
    assert bytes(longer).startswith(b"\x7fELF\0" + new + b"/lib\0") and len(longer) == len(blob)
    no_room = bytearray(blob)
    assert patch_binary(no_room, OLD, new) == (0, [5]) and bytes(no_room) == blob


@given(
    st.binary(max_size=40),
    st.binary(min_size=1, max_size=40).filter(lambda b: b"\0" not in b),
    st.integers(1, 80),
    st.integers(0, 60),
    st.binary(max_size=20),
)
def test_binary_patch_keeps_the_length_and_a_terminating_nul(head, suffix, new_len, pad, tail):
    suffix = suffix.replace(b"/", b"_")
    blob = head + b"\0" + OLD + b"/" + suffix + b"\0" + b"\0" * pad + b"\x01" + tail
    buf = bytearray(blob)
    new = b"/" + b"n" * (new_len - 1)
    patched, misfits = patch_binary(buf, OLD, new, room=len(OLD) + pad)
    assert len(buf) == len(blob)
    start = len(head) + 1
    if misfits:
        assert bytes(buf) == blob
    else:
        end = buf.index(b"\0", start)
        assert bytes(buf[start:end]) == new + b"/" + suffix and end < len(blob) - len(tail) - 1


def test_prefix_scanner_finds_a_prefix_split_across_chunks():
    scanner = PrefixScanner(OLD)
    for chunk in (b"xx" + OLD[:10], OLD[10:20], OLD[20:] + b"\0"):
        scanner.feed(chunk)
    assert scanner.found and scanner.has_nul


def test_elf_run_path_becomes_origin_relative(tmp_path):
    require("gcc")
    prefix = tmp_path / "p" / ("long" * 10)
    (prefix / "lib").mkdir(parents=True)
    (prefix / "bin").mkdir()
    (tmp_path / "h.c").write_text("int vault_hello(void) { return 42; }\n")
    (tmp_path / "m.c").write_text(
        '#include <stdio.h>\nint vault_hello(void);\nint main(void) { printf("%d\\n", vault_hello()); return 0; }\n'
    )
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(prefix / "lib/libvh.so"), str(tmp_path / "h.c")], check=True)
    exe = prefix / "bin/m"
    subprocess.run(
        [
            "gcc",
            "-o",
            str(exe),
            str(tmp_path / "m.c"),
            f"-L{prefix}/lib",
            "-lvh",
            f"-Wl,-rpath,{prefix}/lib:/usr/local/lib",
        ],
        check=True,
    )
    buf = bytearray(exe.read_bytes())
    assert [v for _, v in elf.run_paths(buf)] == [f"{prefix}/lib:/usr/local/lib".encode()]
    assert elf.patch_run_paths(buf, str(prefix).encode(), "bin") == 1
    assert [v for _, v in elf.run_paths(buf)] == [b"$ORIGIN/../lib:/usr/local/lib"]
    moved = tmp_path / "elsewhere"
    shutil.copytree(prefix, moved)
    (moved / "bin/m").write_bytes(buf)
    shutil.rmtree(prefix)
    assert subprocess.run([str(moved / "bin/m")], capture_output=True, text=True).stdout == "42\n"


def test_run_paths_of_a_non_elf_are_empty():
    assert elf.run_paths(bytearray(b"#!/bin/sh\n" * 10)) == []
    assert elf.relative_run_path(b"/a/env/lib/x:/usr/lib", b"/a/env", "lib/python3.11") == b"$ORIGIN/../x:/usr/lib"


def test_conda_paths_and_pip_record_hashes():
    doc = {
        "name": "python",
        "files": ["bin/python", "lib/x.so"],
        "paths_data": {
            "paths": [
                {
                    "_path": "lib/x.so",
                    "file_mode": "binary",
                    "prefix_placeholder": "/ph",
                    "sha256": "a",
                    "sha256_in_prefix": "b",
                    "size_in_bytes": 3,
                }
            ]
        },
    }
    paths = env_meta.conda_paths({"conda-meta/python-3.11.json": json.dumps(doc).encode(), "bad.json": b"{"})
    assert paths["lib/x.so"].placeholder == "/ph" and paths["lib/x.so"].sha256_in_prefix == "b"
    assert paths["bin/python"].file_mode is None
    digest = hashlib.sha256(b"hello").digest()
    b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    record = f"pkg/__init__.py,sha256={b64},5\n../../../bin/tool,sha256={b64},5\npkg.dist-info/RECORD,,\n"
    hashes = env_meta.record_hashes(record.encode(), "lib/python3.11/site-packages")
    assert hashes == {"lib/python3.11/site-packages/pkg/__init__.py": digest.hex(), "bin/tool": digest.hex()}


@pytest.mark.parametrize(
    "paths,version,cuda",
    [
        (["envs/neo/lib/python3.11/site-packages/torch-2.3.0+cu121.dist-info/METADATA"], "2.3.0+cu121", "12.1"),
        (["envs/x/lib/python3.12/site-packages/torch-2.9.0+cu128.dist-info/RECORD"], "2.9.0+cu128", "12.8"),
        (["envs/x/conda-meta/pytorch-2.4.1-py3.11_cuda12.4_cudnn9.1.0_0.json"], "2.4.1", "12.4"),
        (["envs/x/lib/python3.11/site-packages/torch-2.3.0+cpu.dist-info/METADATA"], "2.3.0+cpu", "cpu"),
    ],
)
def test_torch_build_from_member_names(paths, version, cuda):
    assert env_meta.torch_build(paths) | {"from": None} == {"version": version, "cuda": cuda, "from": None}


def test_torch_version_file_and_gpu_fit_say_plainly_when_sm_120_has_no_kernels():
    torch = env_meta.torch_version_file("__version__ = '2.3.0+cu121'\ncuda: Optional[str] = '12.1'\n")
    assert torch["cuda"] == "12.1"
    fit = env_meta.gpu_fit(torch, None, [(9, 0)])
    assert fit.fits == {"12.0": False, "9.0": True}
    assert "no kernels for compute capability 12.0 (sm_120)" in fit.notes[0] and len(fit.notes) == 1
    blackwell = env_meta.gpu_fit({"version": "2.9.0+cu128", "cuda": "12.8"}, None, [(9, 0)])
    assert blackwell.fits == {"12.0": True, "9.0": True} and not blackwell.notes
    measured = env_meta.gpu_fit(torch, "sm_80 sm_86", [(9, 0)], "cuobjdump")
    assert measured.fits["9.0"] is False and measured.arches_from == "cuobjdump"
    assert env_meta.gpu_fit({"version": "2.3.0+cpu", "cuda": "cpu"}) is None
    assert env_meta.python_version(["e/conda-meta/python-3.11.7-h955ad1f_0.json", "e/lib/python3.11/x"]) == "3.11.7"


def _fatbin(entries: list[tuple[int, int]]) -> bytes:
    """A CUDA fat binary container: (kind, sm) entries with 8-byte payloads, laid out as nvcc writes them."""
    import struct

    body = b"".join(struct.pack("<HHIIIIIII", kind, 1, 64, 8, 0, 8, 0, 0, sm) + b"\0" * 32 + b"payload!"
                    for kind, sm in entries)  # fmt: skip
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def test_cuda_arches_are_read_from_the_nv_fatbin_section_of_a_real_elf(tmp_path):
    require("gcc")
    blob = _fatbin([(2, 80), (2, 90), (1, 90)]) + _fatbin([(2, 80), (2, 90), (2, 121)])
    data = ", ".join(str(b) for b in blob)
    source = f'__attribute__((section(".nv_fatbin"), used)) const unsigned char fb[] = {{{data}}};\n'
    (tmp_path / "k.c").write_text(source + "int f(void) { return 0; }\n")
    lib = tmp_path / "libk.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "k.c")], check=True)
    counts = cuda.fatbin_arches(lib.read_bytes())
    assert counts == {"sm_80": 2, "sm_90": 2, "compute_90": 1, "sm_121": 1}
    assert cuda.main_arches(counts) == "sm_80 compute_90 sm_90 sm_121"
    assert cuda.main_arches({"sm_90": 400, "sm_120": 380, "sm_121": 1}) == "sm_90 sm_120"
    assert cuda.fatbin_arches(b"\x7fELF" + b"\0" * 100) == {}


def test_a_pypi_torch_gets_its_cuda_from_the_nvidia_runtime_wheel():
    site = "envs/x/lib/python3.11/site-packages"
    paths = [f"{site}/torch-2.14.1.dist-info/METADATA", f"{site}/nvidia_cuda_runtime-13.0.96.dist-info/RECORD"]
    assert env_meta.torch_build(paths)["cuda"] == "13.0"
    paths[1] = f"{site}/nvidia_cuda_runtime_cu12-12.1.105.dist-info/RECORD"
    assert env_meta.torch_build(paths)["cuda"] == "12.1"
    assert env_meta.gpu_fit({"version": "2.14.1", "cuda": "13.0"}, None, [(9, 0)]).fits == {
        "12.0": True,
        "9.0": True,
    }


def test_relocate_keeps_sourceless_byte_code_and_drops_stale_caches(tmp_path):
    from cloudvault.restore.env.rewrite import relocate

    old, new = "/old/env", "/new/place/env"
    files = {
        "lib/legacy.pyc": b"\x00code " + old.encode(),  # importable without source: the module itself
        "lib/__pycache__/orphan.cpython-311.pyc": b"\x00" + old.encode(),  # never imported without orphan.py
        "lib/x.py": f"HOME = '{old}/share'\n".encode(),
        "lib/__pycache__/x.cpython-311.pyc": b"\x00stale",
        "bin/tool": f"#!{old}/bin/python\nprint(1)\n".encode(),
    }
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    holding = {"lib/legacy.pyc": True, "lib/__pycache__/orphan.cpython-311.pyc": True, "lib/x.py": False,
               "bin/tool": False}  # fmt: skip
    moved = relocate(tmp_path, holding, old, new, {})
    assert (tmp_path / "lib/legacy.pyc").exists()
    assert not (tmp_path / "lib/__pycache__/orphan.cpython-311.pyc").exists()
    assert not (tmp_path / "lib/__pycache__/x.cpython-311.pyc").exists()
    assert (tmp_path / "lib/x.py").read_text() == "HOME = '/new/place/env/share'\n"
    assert (tmp_path / "bin/tool").read_bytes().startswith(b"#!/new/place/env/bin/python\n")
    assert moved.pyc_removed == 2 and moved.pyc_note.startswith("no python in the env")
    assert {r["path"]: r["how"] for r in moved.rewritten} == {"bin/tool": "text", "lib/x.py": "text"}


def test_a_target_that_appears_during_a_restore_is_never_replaced_without_force(tmp_path):
    from cloudvault.errors import DestinationExists
    from cloudvault.restore.env.place import swap_into_place

    (tmp_path / "env").mkdir()
    (tmp_path / "env/theirs").write_text("placed by another restore meanwhile")
    (tmp_path / ".env.vault-restore-1").mkdir()
    with pytest.raises(DestinationExists):
        swap_into_place(tmp_path / ".env.vault-restore-1", tmp_path / "env", force=False)
    assert (tmp_path / "env/theirs").exists()
    swap_into_place(tmp_path / ".env.vault-restore-1", tmp_path / "env", force=True)
    assert list((tmp_path / "env").iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["env", "home"]


def test_a_restore_and_a_move_land_an_env_whole_or_leave_nothing(tmp_path, monkeypatch):
    """place.placed, the one staging -> sync -> rename for both: what the block built appears at the target only
    once it ended; a block that fails (Ctrl-C too) leaves no staging folder, and a full disk is NoSpace (exit 6)."""
    import errno
    import os

    from cloudvault import errors
    from cloudvault.restore.env import place

    synced = []
    monkeypatch.setattr(place, "sync_filesystem", lambda folder: synced.append(os.path.basename(folder)))
    target = tmp_path / "envs/neo"
    for failure in (KeyboardInterrupt(), errors.HashMismatch(path="x", expected="a", found="b"),
                    OSError(errno.ENOSPC, "No space left on device")):  # fmt: skip
        with pytest.raises((type(failure), errors.NoSpace)) as raised, place.placed("neo", target, 0, False) as staging:
            (staging.path / "bin").mkdir()
            raise failure
        assert list(target.parent.iterdir()) == [] and synced == []
        assert isinstance(raised.value, errors.NoSpace) == isinstance(failure, OSError)
    with place.placed("neo", target, 0, force=False) as staging:
        (staging.path / "bin").mkdir()
        assert not target.exists()
    assert synced == [f".neo{place.STAGING_MARK}{os.getpid()}"] and staging.sync_seconds >= 0
    assert [p.name for p in target.parent.iterdir()] == ["neo"] and (target / "bin").is_dir()
    with pytest.raises(errors.DestinationExists), place.placed("neo", target, 0, force=False):
        pass
    with pytest.raises(place.NotEnoughSpace), place.placed("neo", target, 1 << 62, force=True):
        pass
    assert [p.name for p in target.parent.iterdir()] == ["neo"]


def test_byte_code_is_moved_in_place_unless_a_constant_holds_the_old_prefix(tmp_path):
    """A .pyc whose only trace of the old prefix is its file name is moved in place (header kept, still valid for
    its source); one whose constants hold it (folded from a source that does not) is compiled again."""
    import importlib.util
    import marshal
    import os
    import py_compile
    import sys
    from pathlib import Path

    from cloudvault.restore.env.rewrite import relocate

    old_root, new_root = tmp_path / "old", tmp_path / "new-place"
    old, new = str(old_root / "env"), str(new_root / "env")
    root = tmp_path / "staged"
    (root / "bin").mkdir(parents=True)
    os.symlink(sys.executable, root / "bin/python")
    lib = root / "lib"
    lib.mkdir()
    half = len(old) // 2
    sources = {"plain.py": "def f():\n    return 1\n", "folded.py": f"X = {old[:half]!r} + {old[half:]!r}\n"}
    holding = {}
    for name, text in sources.items():
        (lib / name).write_text(text)
        cfile = importlib.util.cache_from_source(str(lib / name))
        py_compile.compile(str(lib / name), cfile=cfile, dfile=f"{old}/lib/{name}", doraise=True)
        assert old.encode() in Path(cfile).read_bytes()
        holding[os.path.relpath(cfile, root)] = True
    before = {n: Path(importlib.util.cache_from_source(str(lib / n))).read_bytes() for n in sources}
    moved = relocate(root, holding, old, new, {})
    assert (moved.pyc_moved, moved.pyc_removed, moved.pyc_recompiled) == (1, 1, 1), moved
    for name in sources:
        data = Path(importlib.util.cache_from_source(str(lib / name))).read_bytes()
        code = marshal.loads(data[16:])
        assert code.co_filename == f"{new}/lib/{name}"
    plain = Path(importlib.util.cache_from_source(str(lib / "plain.py"))).read_bytes()
    assert old.encode() not in plain.replace(new.encode(), b"")
    assert plain[:16] == before["plain.py"][:16]  # magic, flags, source mtime and size: still valid
    assert marshal.loads(plain[16:]).co_consts == marshal.loads(before["plain.py"][16:]).co_consts


def test_the_gpu_checks_of_env_restore_and_repro_are_frozen_typed_results_whose_documents_are_unchanged(
    tmp_path, monkeypatch
):
    import dataclasses
    from types import SimpleNamespace

    from cloudvault.repro import dry_run
    from cloudvault.restore.env import restore
    from cloudvault.tools import gpu

    def frozen(value) -> bool:
        return dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen

    fit = env_meta.gpu_fit({"version": "2.3.0+cu121", "cuda": "12.1"}, None, [(9, 0)])
    assert frozen(fit) and fit.fits == {"12.0": False, "9.0": True} and len(fit.notes) == 1
    assert fit.to_json() == {"arches": fit.arches, "arches_from": "torch release wheels for CUDA 12.1",
                             "fits": {"12.0": False, "9.0": True}, "notes": list(fit.notes)}  # fmt: skip
    version = tmp_path / "lib/python3.11/site-packages/torch/version.py"
    version.parent.mkdir(parents=True)
    version.write_text("__version__ = '2.3.0+cu121'\ncuda = '12.1'\n")
    monkeypatch.setattr("cloudvault.restore.env.source.local_caps", lambda: [(9, 0)])
    installed = restore.installed_gpu_fit(tmp_path)
    torch = {"version": "2.3.0+cu121", "cuda": "12.1", "from": "version.py"}
    assert frozen(installed) and installed.notes == fit.notes and installed.to_json() == {"torch": torch,
                                                                                         **fit.to_json()}  # fmt: skip
    h200 = gpu.Gpu(0, "NVIDIA H200", (9, 0), 10, 143771)
    monkeypatch.setattr(gpu, "local_gpus", lambda: [h200])
    plan = SimpleNamespace(standin=False, processes=[SimpleNamespace(gpu=0)])
    (here,) = dry_run.gpus_here(plan)
    assert frozen(here) and (here.index, here.sm) == (0, "sm_90")
    assert here.to_json() == {"index": 0, "name": "NVIDIA H200", "compute_cap": "9.0", "sm": "sm_90",
                              "memory_used_mib": 10, "memory_total_mib": 143771}  # fmt: skip


def test_a_smoke_check_is_a_frozen_typed_result_whose_document_is_unchanged(tmp_path):
    import dataclasses

    from cloudvault.restore.env.checks import run_checks

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/hello").write_text("#!/bin/sh\necho hi\n")
    (tmp_path / "bin/hello").chmod(0o755)
    ok, missing = run_checks(tmp_path, {"hello": "hello", "gone": "no-such-program-here"})
    assert dataclasses.is_dataclass(ok) and ok.__dataclass_params__.frozen
    assert ok.to_json() == {"name": "hello", "command": "hello", "ok": True, "exit_code": 0, "output": "hi"}
    assert (missing.name, missing.ok, missing.exit_code) == ("gone", False, None) and missing.output
