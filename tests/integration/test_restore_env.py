"""`vault restore env`: real envs (venv --copies, pip-installed wheels, conda-meta, an ELF with a RUNPATH), built
here once per session, packed with GNU tar + zstd at a long prefix, restored at that prefix, at a shorter and a
longer one, then run. (What needs no env built here, hostile archives and the demo mirror's envs, is
tests/cli/test_restore_env.py.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import require
from envs_build import Lab, build_lab

from cloudvault.cli.main import main

pytestmark = pytest.mark.venv
LONG_TAIL = "a-much-longer-prefix-than-the-lab-used-" + "x" * 60  # > 127 bytes of #! once under tmp


@pytest.fixture(scope="session")
def lab(tmp_path_factory) -> tuple[Lab, Path]:
    """The envs, built, packed and indexed once per session (pip installs are slow on shared cores)."""
    for tool in ("tar", "zstd"):
        require(tool)
    base = tmp_path_factory.mktemp("lab")
    try:
        built = build_lab(base)
    except subprocess.CalledProcessError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"could not build the test envs (pip offline?): {exc.stderr[-300:]!r}")
    db = base / "catalog.db"
    assert main(["--catalog", str(db), "index", "-q", str(built.mirror)]) == 0
    return built, db


@pytest.fixture
def env_vault(lab, tmp_path, monkeypatch, vault):
    """vault(...) against a copy of the lab's catalog, with the lab's recipe on VAULT_RECIPES."""
    built, db = lab
    mine = tmp_path / "catalog.db"
    shutil.copy(db, mine)
    monkeypatch.setenv("VAULT_RECIPES", str(built.recipes))

    def run(*args: str):
        return vault("--catalog", str(mine), "restore", "env", "lab", *args)

    run.catalog = mine
    return run


def _run(exe: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, **kw)


def _files_holding(root: Path, needle: bytes) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
            hits.append(str(path.relative_to(root)))
    return hits


def _assert_runs(prefix: Path) -> None:
    """The env's python, its compiled extensions, its console scripts and pip, all from the new prefix."""
    r = _run(
        prefix / "bin/python",
        "-c",
        "import sys, charset_normalizer.md as md, markupsafe._speedups as s; "
        "print(sys.prefix); print(md.__file__); print(s.__file__)",
    )
    assert r.returncode == 0, r.stderr
    said_prefix, md_file, speedups = r.stdout.split()
    assert said_prefix == str(prefix)
    assert md_file.startswith(str(prefix)) and md_file.endswith(".so")
    assert speedups.startswith(str(prefix)) and speedups.endswith(".so")
    r = _run(prefix / "bin/normalizer", "--version")
    assert r.returncode == 0 and "Charset-Normalizer" in r.stdout + r.stderr, r.stderr
    r = _run(prefix / "bin/python", "-m", "pip", "list", "--disable-pip-version-check")
    assert r.returncode == 0 and "charset-normalizer" in r.stdout and "MarkupSafe" in r.stdout
    r = _run(prefix / "bin/vault-demo-hello")
    assert r.stdout.strip() == f"hello from {prefix}"


def test_list_names_envs_with_python_torch_and_cuda_build_without_reading_archives(env_vault, monkeypatch):
    from cloudvault.io import members

    monkeypatch.setattr(members.MemberReader, "open", lambda *a: pytest.fail("--list must not decompress"))
    r = env_vault("--list", "--json")
    assert r.code == 0, r.err
    envs = {e["name"]: e for e in json.loads(r.out)["envs"]}
    assert set(envs) == {"sparsespec", "neo"}
    assert envs["neo"]["torch"]["cuda"] == "12.1" and envs["sparsespec"]["torch"] is None
    assert envs["sparsespec"]["python"] == ".".join(map(str, sys.version_info[:3]))  # from conda-meta python-X.Y.Z
    assert envs["neo"]["gpu"]["fits"]["12.0"] is False
    assert envs["sparsespec"]["files"] > 500 and envs["sparsespec"]["conda_packages"] == 2
    text = env_vault("--list")
    assert "no kernels for compute capability 12.0 (sm_120)" in text.out


def test_dry_run_reads_only_conda_meta_and_writes_nothing(env_vault, tmp_path, monkeypatch):
    from cloudvault.io import members

    opened = []
    real_open = members.MemberReader.open
    monkeypatch.setattr(members.MemberReader, "open", lambda self, m: opened.append(m.path) or real_open(self, m))
    target_root = tmp_path / "root"
    r = env_vault("--dry-run", "--to", str(target_root), "--json")
    assert r.code == 0, r.err
    plans = {p["name"]: p for p in json.loads(r.out)["plan"]}
    assert opened and all("/conda-meta/" in p for p in opened)
    assert plans["sparsespec"]["relocate"] and plans["sparsespec"]["conda_binary_with_prefix"] == 1
    assert plans["sparsespec"]["target"] == str(target_root / "envs/sparsespec")
    assert plans["sparsespec"]["pip_pyc"] > 100 and plans["sparsespec"]["enough_space"]
    assert "torch is a cu121 build" in plans["neo"]["risks"]
    assert any("no kernels for compute capability 12.0" in risk for risk in plans["neo"]["risks"])
    assert not target_root.exists()


def test_restore_at_the_original_prefix_is_gnu_tar_byte_for_byte_and_runs(lab, env_vault, tmp_path):
    built, _ = lab
    prefix = built.prefix("sparsespec")
    try:
        r = env_vault("sparsespec", "--json")
        assert r.code == 0, r.err
        done = json.loads(r.out)["restored"][0]
        assert done["target"] == str(prefix) and done["rewritten"] == 0
        assert done["verified"]["conda_checked"] >= 4 and done["verified"]["record_checked"] > 500
        assert not done["verified"]["conda_differ"] and not done["verified"]["record_differ"]
        assert all(c["ok"] for c in done["checks"]) and len(done["checks"]) == 5
        ref = tmp_path / "ref"
        ref.mkdir()
        subprocess.run(["tar", "-I", "zstd", "-C", str(ref), "-xf", str(built.archive("sparsespec"))], check=True)
        for path in (ref / "envs/sparsespec").rglob("*"):
            mine = prefix / path.relative_to(ref / "envs/sparsespec")
            if path.is_symlink():
                assert os.readlink(mine) == os.readlink(path)
            elif path.is_file():
                assert mine.read_bytes() == path.read_bytes(), mine
                assert mine.stat().st_mode & 0o777 == path.stat().st_mode & 0o777
        _assert_runs(prefix)
        assert not list(prefix.parent.glob(".*vault-restore-*"))
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def test_restore_at_a_shorter_prefix_rewrites_every_trace_of_the_old_one(lab, env_vault, tmp_path):
    built, _ = lab
    old = str(built.prefix("sparsespec")).encode()
    prefix = tmp_path / "e"
    r = env_vault("sparsespec", "--prefix", str(prefix), "--json")
    assert r.code == 0, r.err
    done = json.loads(r.out)["restored"][0]
    # byte-code moved in place (its header kept), compiled again only where its source was rewritten
    assert done["pyc_moved"] > 100 and done["pyc_recompiled"] == done["pyc_removed"] < done["pyc_moved"]
    assert _files_holding(prefix, old) == ["conda-meta/vault-restore.json"]  # the marker names where it came from
    assert _files_holding(prefix, b".vault-restore-") == []  # byte-code names the prefix, never the staging folder
    api = next(prefix.glob("lib/python*/site-packages/charset_normalizer/__pycache__/api.*.pyc"))
    pyc = api.read_bytes()
    assert f"{prefix}/lib/".encode() in pyc
    _assert_runs(prefix)
    # still valid for its source: importing it with byte-code writing on leaves it as it is
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run([str(prefix / "bin/python"), "-c", "import charset_normalizer.api"], env=env, check=True, cwd="/")
    assert api.read_bytes() == pyc
    padded = (prefix / "lib/libvaultpad.so").read_bytes()
    assert (prefix / "lib/libvaultpad.so").stat().st_mode & 0o777 == 0o444  # patched, its mode kept
    original = subprocess.run(
        ["tar", "-I", "zstd", "-xOf", str(built.archive("sparsespec")), "envs/sparsespec/lib/libvaultpad.so"],
        capture_output=True,
        check=True,
    ).stdout
    assert len(padded) == len(original)
    start = padded.index(str(prefix).encode())
    assert padded[start:].startswith(str(prefix).encode() + b"/lib/vaultpad\0\0")
    assert padded.endswith(b"\x04end") and padded[:start] == original[:start]
    assert (prefix / "etc/vaultpad/paths.conf").read_text() == f"data_dir = {prefix}/share/vaultpad\n"
    if built.has_elf:
        assert _run(prefix / "bin/vault-rpath-hello").stdout.strip() == "42"
    marker = json.loads((prefix / "conda-meta/vault-restore.json").read_text())
    assert marker["old_prefix"] == old.decode() and marker["prefix"] == str(prefix)
    assert {r["path"] for r in marker["rewritten"]} >= {"bin/normalizer", "pyvenv.cfg", "lib/libvaultpad.so"}


def test_restore_at_a_longer_prefix_uses_the_trampoline_and_the_placeholder_room(lab, env_vault, tmp_path):
    built, _ = lab
    prefix = tmp_path / LONG_TAIL / "envs/sparsespec"
    assert len(f"#!{prefix}/bin/python") > 127 and len(str(prefix)) < 255
    r = env_vault("sparsespec", "--prefix", str(prefix))
    assert r.code == 0, r.err
    script = (prefix / "bin/normalizer").read_text()
    # vault's trampoline; or pip's own, rewritten, where the lab's build prefix was already too long (pytest-xdist's
    # longer temp folders): either way sh execs the new prefix's python
    assert script.startswith((f"#!/bin/sh\n'''exec' \"{prefix}/bin/python\" \"$0\" \"$@\"\n' '''\n",
                              f"#!/bin/sh\n'''exec' {prefix}/bin/python \"$0\" \"$@\"\n' '''\n"))
    _assert_runs(prefix)
    padded = (prefix / "lib/libvaultpad.so").read_bytes()
    assert str(prefix).encode() + b"/lib/vaultpad\0" in padded  # grew into conda's NUL padding
    if built.has_elf:
        assert _run(prefix / "bin/vault-rpath-hello").stdout.strip() == "42"
        dyn = subprocess.run(["readelf", "-d", str(prefix / "bin/vault-rpath-hello")], capture_output=True, text=True)
        assert "$ORIGIN/../lib" in dyn.stdout or not shutil.which("readelf")
    assert "restored at" in r.out and "compiled again" in r.out


def test_a_binary_the_new_prefix_does_not_fit_is_refused_unless_allowed(lab, env_vault, tmp_path):
    prefix = tmp_path / LONG_TAIL / "envs/neo"
    r = env_vault("neo", "--prefix", str(prefix))
    assert r.code == 2 and "lib/libnopad.bin" in r.err and "--allow-unpatched" in r.err
    assert not prefix.exists() and not list(prefix.parent.glob(".*"))
    r = env_vault("neo", "--prefix", str(prefix), "--allow-unpatched", "--json")
    assert r.code == 0, r.err
    done = json.loads(r.out)["restored"][0]
    assert [u["path"] for u in done["unpatched"]] == ["lib/libnopad.bin"]
    assert _run(prefix / "bin/vault-demo-hello").stdout.strip() == f"hello from {prefix}"


def test_restored_env_moves_again_and_a_rerun_is_idempotent(env_vault, tmp_path):
    first, second = tmp_path / "first/sparsespec", tmp_path / LONG_TAIL / "second/sparsespec"
    assert env_vault("sparsespec", "--prefix", str(first)).code == 0
    again = env_vault("sparsespec", "--prefix", str(first))
    assert again.code == 0 and "already restored" in again.out
    planned = json.loads(
        env_vault("sparsespec", "--move", str(first), "--prefix", str(second), "--dry-run", "--json").out
    )
    assert planned["plan"][0]["old_prefix"] == str(first) and not second.exists()
    r = env_vault("sparsespec", "--move", str(first), "--prefix", str(second), "--json")
    assert r.code == 0, r.err
    done = json.loads(r.out)["restored"][0]
    assert done["moved_from"] == str(first) and done["rewritten"] >= 10 and all(c["ok"] for c in done["checks"])
    assert not first.exists()
    assert _files_holding(second, str(first).encode()) == ["conda-meta/vault-restore.json"]
    _assert_runs(second)
    marker = json.loads((second / "conda-meta/vault-restore.json").read_text())
    assert [m["to"] for m in marker["moves"]] == [str(second)] and marker["old_prefix"] == str(first)
    assert (second / "lib/libvaultpad.so").stat().st_mode & 0o777 == 0o444


def test_a_pip_binary_grows_back_into_the_nuls_an_earlier_move_left(lab, env_vault, tmp_path):
    built, _ = lab
    original = len(str(built.prefix("neo")))
    short = tmp_path / "n"
    assert env_vault("neo", "--prefix", str(short)).code == 0
    same_length = tmp_path / ("m" * (original - len(str(tmp_path)) - 1))
    assert len(str(same_length)) == original
    r = env_vault("neo", "--move", str(short), "--prefix", str(same_length))
    assert r.code == 0, r.err
    data = (same_length / "lib/libnopad.bin").read_bytes()
    assert data == b"\x00\x01" + str(same_length).encode() + b"/share\x00\x02\x03"
    too_long = tmp_path / LONG_TAIL / "neo"
    r = env_vault("neo", "--move", str(same_length), "--prefix", str(too_long))
    assert r.code == 2 and "lib/libnopad.bin" in r.err and same_length.is_dir() and not too_long.exists()


def test_existing_target_is_refused_and_untouched_without_force(env_vault, tmp_path):
    target = tmp_path / "taken"
    target.mkdir()
    (target / "mine.txt").write_text("keep me")
    r = env_vault("neo", "--prefix", str(target))
    assert r.code == 2 and "--force" in r.err
    assert [p.name for p in target.iterdir()] == ["mine.txt"]
    r = env_vault("neo", "--prefix", str(target), "--force")
    assert r.code == 0, r.err
    assert not (target / "mine.txt").exists() and (target / "bin/python").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_flipped_byte_in_the_archive_is_exit_5_and_nothing_at_the_target(lab, tmp_path, vault, monkeypatch):
    built, _ = lab
    mirror = tmp_path / "m"
    archive = mirror / "015_nebius_h8_raw_mirror/data/miniforge3_tar/sparsespec.tar.zst"
    archive.parent.mkdir(parents=True)
    shutil.copy2(built.archive("sparsespec"), archive)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(mirror)).code == 0
    st = archive.stat()
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0x01
    archive.write_bytes(data)
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime: only the bytes tell
    monkeypatch.setenv("VAULT_RECIPES", str(built.recipes))
    target = tmp_path / "out/sparsespec"
    r = vault("--catalog", str(db), "restore", "env", "lab", "sparsespec", "--prefix", str(target))
    assert r.code == 5, r.err
    assert not target.exists() and list((tmp_path / "out").iterdir()) == []
    rows = sqlite3.connect(db).execute("SELECT status FROM restores").fetchall()
    assert rows == [("failed",)]


def _restore_in_subprocess(env_vault, target: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "cloudvault",
        "--catalog",
        str(env_vault.catalog),
        "restore",
        "env",
        "lab",
        "sparsespec",
        "--prefix",
        str(target),
        "--no-checks",
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())


def _signal_while_staging(proc: subprocess.Popen, target: Path, sig: int) -> bool:
    """Send sig once the staging folder exists; False when the restore finished first."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if target.parent.exists() and any(
            p.name.startswith(f".{target.name}.vault-restore-") for p in target.parent.iterdir()
        ):
            time.sleep(0.05)
            proc.send_signal(sig)
            return True
        time.sleep(0.002)
    return False


@pytest.mark.parametrize("sig,code", [(signal.SIGKILL, -9), (signal.SIGINT, 130)])
def test_kill_or_ctrl_c_mid_restore_leaves_no_env_and_a_rerun_starts_clean(env_vault, tmp_path, sig, code):
    target = tmp_path / "envs/sparsespec"
    proc = _restore_in_subprocess(env_vault, target)
    try:
        if not _signal_while_staging(proc, target, sig):
            pytest.skip("the restore finished before it could be interrupted")
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the restore was still running 30 s after {sig!r}: killed")
    finally:
        if proc.poll() is None:  # never left running: a test that gives up on its child kills it
            proc.kill()
            proc.communicate()
    assert proc.returncode == code
    assert not target.exists()
    left = [p.name for p in target.parent.iterdir()]
    assert left == ([] if sig == signal.SIGINT else [f".sparsespec.vault-restore-{proc.pid}"])
    r = env_vault("sparsespec", "--prefix", str(target))
    assert r.code == 0, r.err
    assert [p.name for p in target.parent.iterdir()] == ["sparsespec"]  # the killed run's staging is gone
    _assert_runs(target)


def test_not_enough_space_is_exit_6_before_anything_is_written(env_vault, tmp_path, monkeypatch):
    from collections import namedtuple

    from cloudvault.restore.env import place as env_place

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(env_place.shutil, "disk_usage", lambda p: usage(10 << 20, 9 << 20, 1 << 20))
    r = env_vault("sparsespec", "--prefix", str(tmp_path / "full/sparsespec"))
    assert r.code == 6 and "needs about" in r.err
    assert list((tmp_path / "full").iterdir()) == []


def test_small_tmpfs_is_refused_with_exit_6(env_vault, tmp_path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    if (
        shutil.which("mount") is None
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here")
    try:
        r = env_vault("sparsespec", "--prefix", str(mount / "sparsespec"))
        assert r.code == 6 and "needs about" in r.err
        assert list(mount.iterdir()) == []
        # past the free-space check (told there is room), the disk really fills mid-write: same outcome
        from collections import namedtuple

        from cloudvault.restore.env import place as env_place

        roomy = namedtuple("usage", "total used free")(1 << 40, 0, 1 << 40)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(env_place.shutil, "disk_usage", lambda p: roomy)
            r = env_vault("sparsespec", "--prefix", str(mount / "sparsespec"))
        assert r.code == 6 and f"no space left writing {mount / 'sparsespec'}" in r.err, r.err
        assert list(mount.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_restores_are_recorded_and_found_by_search_and_show(env_vault, vault, tmp_path):
    target = tmp_path / "rec/neo"
    r = env_vault("neo", "--prefix", str(target))
    assert r.code == 0 and "1 file(s) differ from conda-meta (changed after install): etc/vaultpad/paths.conf" in r.err
    found = vault("--catalog", str(env_vault.catalog), "search", "restored")
    assert found.code == 0 and str(target) in found.out
    shown = vault("--catalog", str(env_vault.catalog), "show", "015")
    assert f"restored env neo -> {target}: ok" in shown.out
    row = sqlite3.connect(env_vault.catalog).execute("SELECT source_hash, detail FROM restores").fetchone()
    detail = json.loads(row[1])
    assert len(row[0]) == 64 and [c["name"] for c in detail["checks"]] == ["prefix", "hello"]
    assert detail["gpu"]["torch"]["cuda"] == "12.1" and detail["gpu"]["fits"]["12.0"] is False
    assert detail["verified"]["conda_differ"] == ["etc/vaultpad/paths.conf"]


def test_an_archive_that_is_no_env_is_named_as_skipped(lab, tmp_path, vault, monkeypatch):
    built, _ = lab
    mirror = tmp_path / "m"
    folder = mirror / "015_nebius_h8_raw_mirror/data/miniforge3_tar"
    folder.mkdir(parents=True)
    shutil.copy2(built.archive("neo"), folder / "neo.tar.zst")
    shutil.copy2(built.archive("neo"), folder / "neo-copy.tar.zst")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes/readme.txt").write_text("not an env")
    subprocess.run(
        ["tar", "-C", str(tmp_path), "-I", "zstd", "-cf", str(folder / "notes.tar.zst"), "notes"], check=True
    )
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(mirror)).code == 0
    monkeypatch.setenv("VAULT_RECIPES", str(built.recipes))
    doc = json.loads(vault("--catalog", str(db), "restore", "env", "lab", "--list", "--json").out)
    assert [e["name"] for e in doc["envs"]] == ["neo", "neo"]  # the copy too: a name two envs share is no secret
    assert all("2 envs" in e["shared"] for e in doc["envs"])
    assert len(doc["skipped"]) == 1 and "notes.tar.zst: no conda-meta/" in doc["skipped"][0]


def test_unknown_env_is_exit_3_with_the_close_names_and_usage_mistakes_are_exit_2(env_vault, tmp_path):
    r = env_vault("sparsespek")
    assert r.code == 3 and "did you mean: sparsespec" in r.err
    as_json = json.loads(env_vault("sparsespek", "--json").out)
    assert as_json["exit_code"] == 3 and "sparsespek" in as_json["error"]
    assert env_vault("--prefix", str(tmp_path / "x")).code == 2  # two envs, one prefix
    assert env_vault("neo", "--prefix", " ").code == 2
    r = env_vault("neo", "--move", str(tmp_path / "nothing-here"), "--prefix", str(tmp_path / "y"))
    assert r.code == 2 and "only an env vault restored can be moved" in r.err


@pytest.mark.parametrize(
    "line,key",
    [('archive = "x"', "archive"), ("entry = 15", "entry"), ("[checks]\nx = 3", "checks.x"), ("", "entry")],
)
def test_bad_recipe_is_exit_2_naming_the_key(vault, tmp_path, monkeypatch, lab, line, key):
    (tmp_path / "r/env").mkdir(parents=True)
    body = 'archives = "data/*.tar.zst"\n' + ('entry = "015"\n' if key != "entry" else "") + line + "\n"
    (tmp_path / "r/env/broken.toml").write_text(body)
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "r"))
    r = vault("--catalog", str(lab[1]), "restore", "env", "broken", "--list")
    assert r.code == 2 and repr(key) in r.err, r.err


def test_leftovers_of_dead_restores_are_removed_and_a_live_ones_kept(env_vault, tmp_path):
    target = tmp_path / "envs/neo"
    target.parent.mkdir()
    dead, aside = tmp_path / "envs/.neo.vault-restore-4194999", tmp_path / "envs/.neo.vault-replaced-4194999"
    live = tmp_path / f"envs/.neo.vault-restore-{os.getppid()}"  # another restore still running
    for folder in (dead, aside, live):
        (folder / "bin").mkdir(parents=True)
    assert env_vault("neo", "--prefix", str(target), "--no-checks").code == 0
    assert sorted(p.name for p in target.parent.iterdir()) == sorted(["neo", live.name])


def test_list_checks_the_torch_build_against_the_local_gpu(env_vault, tmp_path, monkeypatch):
    fake = tmp_path / "bin/nvidia-smi"  # stands in for the H200's: the real one is checked on the lent device
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho '0, NVIDIA H200, 9.0, 0 MiB, 143771 MiB'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    envs = {e["name"]: e for e in json.loads(env_vault("--list", "--json").out)["envs"]}
    assert envs["neo"]["gpu"]["fits"] == {"12.0": False, "9.0": True}
    assert "kernels for 12.0: NO, 9.0: yes" in env_vault("--list").out


def test_a_failed_smoke_check_is_exit_6_with_the_env_left_in_place_and_recorded(lab, env_vault, tmp_path, monkeypatch):
    built, _ = lab
    recipes = tmp_path / "r"
    shutil.copytree(built.recipes, recipes)
    with open(recipes / "env/lab.toml", "a") as fh:
        fh.write("\n[envs.neo.checks]\nimport-torch = \"python -c 'import torch.cuda'\"\n")  # metadata, no code
    monkeypatch.setenv("VAULT_RECIPES", str(recipes))
    target = tmp_path / "neo"
    r = env_vault("neo", "--prefix", str(target))
    assert r.code == 6 and "smoke checks failed: neo: import-torch" in r.err
    assert "check import-torch: FAILED" in r.out and "check hello: ok" in r.out
    assert (target / "bin/python").exists()
    row = sqlite3.connect(env_vault.catalog).execute("SELECT status, detail FROM restores").fetchone()
    checks = {c["name"]: c["ok"] for c in json.loads(row[1])["checks"]}
    assert row[0] == "ok" and checks == {"prefix": True, "hello": True, "import-torch": False}
