"""Envs whose own files are damaged or hostile (an interpreter link loop, conda-meta JSON of the wrong shape, a
damaged vault-restore.json, an ELF whose headers point past its end): one line and an exit code that says so,
never a traceback and never a success whose checks did not run."""

from __future__ import annotations

import io
import json
import struct
import subprocess
import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = "/opt/" + "lab" * 30  # longer than any test's own folder: a relocated prefix fits where the old one was
RECIPE = f'entry = "015"\narchives = "data/*.tar.zst"\nroot = "{ROOT}"\n'


def _env_archive(path, members) -> None:
    """A .tar.zst of members: (name, body bytes) files, (name, '->', target) symlinks."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for member in members:
            info = tarfile.TarInfo(member[0])
            if len(member) == 3:
                info.type, info.linkname = tarfile.SYMTYPE, member[2]
                tar.addfile(info)
            else:
                info.size, info.mode = len(member[1]), 0o755
                tar.addfile(info, io.BytesIO(member[1]))
    path.parent.mkdir(parents=True, exist_ok=True)
    zst = subprocess.run(["zstd", "-q", "-c"], input=buf.getvalue(), capture_output=True, check=True).stdout
    path.write_bytes(zst)


@pytest.fixture
def env_mirror(tmp_path, vault, monkeypatch):
    """make(members) -> catalog path: a mirror holding one env archive at 015_x/data/env.tar.zst, indexed, with
    the recipe `lab` (packed at ROOT) found through VAULT_RECIPES."""
    (tmp_path / "r/env").mkdir(parents=True)
    (tmp_path / "r/env/lab.toml").write_text(RECIPE)
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "r"))

    def make(members) -> str:
        _env_archive(tmp_path / "m/015_x/data/env.tar.zst", members)
        db = tmp_path / "c.db"
        r = vault("--catalog", str(db), "index", "-q", str(tmp_path / "m"))
        assert r.code == 0, r.err
        return str(db)

    return make


def _one_line(r, code: int) -> None:
    assert r.code == code, (r.code, r.err)
    assert r.err.startswith("vault: error: ") and r.err.count("\n") == 1 and "Traceback" not in r.err, r.err


def test_a_venv_whose_interpreter_links_loop_fails_its_check_and_never_says_none(env_mirror, vault, tmp_path, tally):
    db = env_mirror([("envs/loopy/pyvenv.cfg", b"home = /usr/bin\nversion = 3.11.7\n"),
                     ("envs/loopy/lib/python3.11/site-packages/x.py", b"x = 1\n"),
                     ("envs/loopy/bin/python", "->", "python3"), ("envs/loopy/bin/python3", "->", "python3.11"),
                     ("envs/loopy/bin/python3.11", "->", "python")])  # fmt: skip
    tally("hostile_input")
    r = vault("--catalog", db, "restore", "env", "lab", "loopy", "--prefix", str(tmp_path / "out/loopy"))
    assert r.code == 6, (r.code, r.out, r.err)
    assert "None" not in r.out + r.err
    assert "check prefix: FAILED" in r.out and "loop" in r.out, r.out


def _conda_env(meta: dict) -> list:
    """A conda env `x` with one package record (conda-meta/pkg-1-0.json) and a text file holding its prefix."""
    script = f"#!/bin/sh\necho {ROOT}/envs/x\n".encode()
    return [("envs/x/conda-meta/pkg-1-0.json", json.dumps(meta).encode()), ("envs/x/bin/hello", script)]


@pytest.mark.parametrize(
    "meta",
    [
        {"name": "pkg", "paths_data": [{"_path": "bin/hello"}]},
        {"name": "pkg", "paths_data": {"paths": [{"_path": ["bin/hello"], "file_mode": "text"}]}},
        {"name": "pkg", "paths_data": {"paths": {"_path": "bin/hello"}}},
        {"name": ["pkg"], "files": "bin/hello", "paths_data": {"paths": [["bin/hello"], 7]}},
    ],
)
def test_conda_meta_of_the_wrong_shape_is_not_a_traceback_in_restore_dry_run_or_move(env_mirror, vault, tmp_path,
                                                                                      tally, meta):  # fmt: skip
    db = env_mirror(_conda_env(meta))
    first, second = str(tmp_path / "a/x"), str(tmp_path / "b/x")
    moves = (["--move", first, "--prefix", second, "--dry-run"], ["--move", first, "--prefix", second])
    for argv in (["--list"], ["--dry-run", "--prefix", first], ["--prefix", first], *moves):
        tally("corruption")
        r = vault("--catalog", db, "restore", "env", "lab", "x", *argv, "--no-checks")
        tally("traceback", int("Traceback" in r.err))
        assert r.code == 0 and "Traceback" not in r.err, (argv, r.err)
    assert (tmp_path / "b/x/bin/hello").read_text() == f"#!/bin/sh\necho {second}\n"


@pytest.mark.parametrize("damage", [b"[1]", b"{}", b'{"prefix": 7}', b"{", b"\xff\xfe"])
def test_a_damaged_vault_restore_json_is_one_line_for_move_and_restore(env_mirror, vault, tmp_path, tally, damage):
    db = env_mirror(_conda_env({"name": "pkg", "files": ["bin/hello"]}))
    first = tmp_path / "a/x"
    assert vault("--catalog", db, "restore", "env", "lab", "x", "--prefix", str(first), "--no-checks").code == 0
    (first / "conda-meta/vault-restore.json").write_bytes(damage)
    for argv in (["--move", str(first), "--prefix", str(tmp_path / "b/x"), "--dry-run"],
                 ["--move", str(first), "--prefix", str(tmp_path / "b/x")], ["--prefix", str(first)]):  # fmt: skip
        tally("corruption")
        r = vault("--catalog", db, "restore", "env", "lab", "x", *argv, "--no-checks")
        tally("traceback", int("Traceback" in r.err))
        _one_line(r, 5)
        assert "vault-restore.json" in r.err, r.err
    assert first.is_dir() and not (tmp_path / "b/x").exists()
    r = vault("--catalog", db, "restore", "env", "lab", "x", "--prefix", str(first), "--no-checks", "--force")
    assert r.code == 0, r.err


@pytest.mark.parametrize("phoff,phnum", [(2**64 - 1, 1), (2**40, 3), (64, 60000), (1 << 62, 65535)])
def test_an_elf_whose_headers_point_past_its_end_is_relocated_as_any_binary(env_mirror, vault, tmp_path, tally,
                                                                             phoff, phnum):  # fmt: skip
    header = (
        b"\x7fELF" + bytes([2, 1, 1]) + bytes(25) + struct.pack("<Q", phoff) + bytes(14) + struct.pack("<HH", 56, phnum)
    )
    elf = header.ljust(64, b"\0") + f"{ROOT}/envs/x/lib\0".encode() + bytes(16)
    db = env_mirror([("envs/x/conda-meta/pkg-1-0.json", b'{"name": "pkg"}'), ("envs/x/lib/libx.so", elf)])
    tally("hostile_input")
    target = tmp_path / "x"
    r = vault("--catalog", db, "restore", "env", "lab", "x", "--prefix", str(target), "--no-checks")
    assert r.code == 0 and "Traceback" not in r.err, r.err
    assert f"{target}/lib\0".encode() in (target / "lib/libx.so").read_bytes()


@settings(max_examples=300, deadline=None)
@given(tail=st.binary(max_size=300), order=st.sampled_from("<>"), wide=st.booleans(),
       numbers=st.lists(st.integers(0, 2**32 - 1), min_size=8, max_size=8))  # fmt: skip
def test_run_paths_of_any_header_never_raise(tail, order, wide, numbers):
    """Program and dynamic headers whose offsets, counts and string indexes are anything at all."""
    from cloudvault.restore.env import elf

    ident = b"\x7fELF" + bytes([2 if wide else 1, 1 if order == "<" else 2, 1]) + bytes(9)
    phoff, phnum = numbers[0] % 128, numbers[1] % 4
    if wide:
        header = ident + bytes(16) + struct.pack(order + "Q", phoff) + bytes(14) + struct.pack(order + "HH", 56, phnum)
        segment = struct.pack(order + "IIQQQQQQ", 2 - numbers[2] % 2, 0, *(n * 8 for n in numbers[3:7]), 0, 8)
        dynamic = struct.pack(order + "QQQQ", 5, numbers[7], 29, numbers[6])
    else:
        header = ident + bytes(12) + struct.pack(order + "I", phoff) + bytes(10) + struct.pack(order + "HH", 32, phnum)
        segment = struct.pack(order + "IIIIIIII", 2 - numbers[2] % 2, *numbers[3:7], 0, 0, 4)
        dynamic = struct.pack(order + "IIII", 5, numbers[7], 29, numbers[6])
    buf = bytearray(header.ljust(64, b"\0") + (segment + dynamic) * 2 + tail)
    for start, value in elf.run_paths(buf):
        assert 0 <= start < len(buf) and buf[start : start + len(value)] == value
    elf.patch_run_paths(buf, b"/opt/lab", "lib")


# ids kept short: pytest puts the test's id in PYTEST_CURRENT_TEST, and a 200 KB one is too long for exec
@pytest.mark.parametrize(
    "record",
    [b"x" * 200_000 + b",sha256=abc,1\n", b'"open quote,sha256=abc\n', b"\0\0\0\n"],
    ids=["field-over-csv-limit", "open-quote", "nul-bytes"],
)
def test_a_pip_record_that_is_not_csv_is_passed_over_not_a_traceback(env_mirror, vault, tmp_path, tally, record):
    db = env_mirror(_conda_env({"name": "pkg", "files": ["bin/hello"]})
                    + [("envs/x/lib/python3.11/site-packages/x-1.dist-info/RECORD", record)])  # fmt: skip
    tally("corruption")
    r = vault("--catalog", db, "restore", "env", "lab", "x", "--prefix", str(tmp_path / "x"), "--no-checks")
    tally("traceback", int("Traceback" in r.err))
    assert r.code == 0 and "Traceback" not in r.err, r.err
