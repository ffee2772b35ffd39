"""`vault restore env` on the envs people really make, which this project did not make: default `python -m venv`
(symlinked interpreter), `virtualenv` and `uv venv --seed` envs, each with a console script and compiled
extensions from PyPI wheels, packed the RunPod way (`tar -C /workspace/env -cf - NAME | zstd`) in an entry shaped
like 017; and one archive holding several envs (a conda root with envs/*, several venvs side by side)."""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import require

from cloudvault.archive.scan import ArchiveScan
from cloudvault.cli.main import main

# builds real venvs with venv, virtualenv and uv and runs their pythons
pytestmark = pytest.mark.venv

ENTRY = "017_runpod_pro6000_workspace_mirror"
BACKUP = "data/workspace/cs/backup"
KINDS = ("venv", "virtualenv", "uv")
WHEELS = ("charset-normalizer", "markupsafe")  # `normalizer` console script; mypyc and C extensions
BARE_PATH = "/usr/bin:/bin"
RECIPE = """description = "real venvs, packed the RunPod way"
entry = "017"
archives = "data/workspace/cs/backup/env-*.tar.zst"
root = "{root}"
"""


def _quiet(cmd: list[str], **kw) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=600, **kw)


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "UV_"))}


def build_venv(kind: str, prefix: Path) -> None:
    """One env of that kind with the wheels pip-installed by its own pip."""
    env = _clean_env()
    if kind == "venv":
        _quiet([sys.executable, "-m", "venv", str(prefix)], env=env)
    elif kind == "virtualenv":
        _quiet([sys.executable, "-m", "virtualenv", "-q", "-p", sys.executable, str(prefix)], env=env)
    else:
        _quiet([shutil.which("uv"), "venv", "-q", "--seed", "-p", sys.executable, str(prefix)], env=env)
    pip = [str(prefix / "bin/python"), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check"]
    _quiet([*pip, *WHEELS], env=env)


def pack_runpod(workspace: Path, name: str, out: Path) -> None:
    """`tar -C /workspace/env -cf - NAME | zstd`, as the pod's envs were packed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as fh:
        tar = subprocess.Popen(["tar", "-C", str(workspace), "-cf", "-", name], stdout=subprocess.PIPE)
        subprocess.run(["zstd", "-q", "-c"], stdin=tar.stdout, stdout=fh, check=True)
        assert tar.wait() == 0


@pytest.fixture(scope="session")
def pod(tmp_path_factory):
    """The three kinds built at /…/workspace/env/NAME, packed, removed; the mirror indexed."""
    for tool in ("tar", "zstd", "uv"):
        require(tool)
    pytest.importorskip("virtualenv") if os.environ.get("CI") != "true" else __import__("virtualenv")
    base = tmp_path_factory.mktemp("pod")
    workspace = base / "workspace/env"
    mirror = base / "mirror"
    try:
        for kind in KINDS:
            build_venv(kind, workspace / f"{kind}-env")
        build_venv("venv", workspace / "many/alpha")  # several venvs in one archive
        build_venv("uv", workspace / "many/beta")
    except subprocess.CalledProcessError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"could not build the venvs (no wheels?): {exc.stderr[-300:]!r}")
    for kind in KINDS:
        pack_runpod(workspace, f"{kind}-env", mirror / ENTRY / BACKUP / f"env-{kind}-env.tar.zst")
    pack_runpod(workspace, "many", mirror / ENTRY / BACKUP / "env-many.tar.zst")
    shutil.rmtree(workspace)
    recipes = base / "recipes"
    (recipes / "env").mkdir(parents=True)
    (recipes / "env/pod.toml").write_text(RECIPE.format(root=workspace))
    db = base / "catalog.db"
    assert main(["--catalog", str(db), "index", "-q", str(mirror)]) == 0  # interpreter links are not damage
    return workspace, mirror, recipes, db


@pytest.fixture
def pod_vault(pod, tmp_path, monkeypatch, vault):
    workspace, mirror, recipes, db = pod
    mine = tmp_path / "catalog.db"
    shutil.copy(db, mine)
    monkeypatch.setenv("VAULT_RECIPES", str(recipes))

    def run(*args: str):
        return vault("--catalog", str(mine), "restore", "env", "pod", *args)

    run.catalog = mine
    run.workspace = workspace
    return run


def _from_root(*argv: str) -> subprocess.CompletedProcess:
    """Run from `cd /` with a bare PATH, no PYTHON* or VIRTUAL_ENV leaking in."""
    env = {"PATH": BARE_PATH, "HOME": os.environ["HOME"], "LANG": "C.UTF-8"}
    return subprocess.run(list(argv), cwd="/", env=env, capture_output=True, text=True, timeout=120)


def assert_runs_at(prefix: Path) -> None:
    """sys.prefix, the compiled extensions, the console script and pip all name prefix."""
    code = (
        "import sys, markupsafe._speedups as s, charset_normalizer.md as m; print(sys.prefix, s.__file__, m.__file__)"
    )
    r = _from_root(str(prefix / "bin/python"), "-c", code)
    assert r.returncode == 0, r.stderr
    said, speedups, md = r.stdout.split()
    assert said == str(prefix) and speedups.startswith(f"{prefix}/lib/") and md.startswith(f"{prefix}/lib/")
    r = _from_root(str(prefix / "bin/normalizer"), "--version")
    assert r.returncode == 0 and "normalizer" in r.stdout.lower() + r.stderr.lower(), r.stderr
    r = _from_root(str(prefix / "bin/python"), "-m", "pip", "--version")
    assert r.returncode == 0 and f"from {prefix}/lib/" in r.stdout, r.stdout + r.stderr
    assert f"VIRTUAL_ENV={prefix}" in (prefix / "bin/activate").read_text().replace("'", "").replace('"', "")
    home = dict(line.split(" = ", 1) for line in (prefix / "pyvenv.cfg").read_text().splitlines() if " = " in line)
    assert not any("/workspace/env/" in v and str(prefix) not in v for v in home.values() if "workspace" in v)
    link = os.readlink(prefix / "bin/python")
    assert not link.startswith(str(prefix)), link  # the interpreter link recreated, not written through


def _interpreter_link(prefix: Path) -> str:
    """Where bin/python leads out of the venv: `python -m venv` run as `python3` writes python -> python3 -> base,
    run as `python` it writes python -> base; follow the links inside bin/ to the one that leaves it."""
    link = prefix / "bin/python"
    for _ in range(8):
        target = os.readlink(link)
        if os.path.isabs(target):
            return target
        link = link.parent / target
    raise AssertionError(f"{prefix}/bin/python: a loop of relative links")


def test_index_of_healthy_venv_archives_flags_no_damage(pod):
    _workspace, _mirror, _recipes, db = pod
    kinds = {k for (k,) in sqlite3.connect(db).execute("SELECT kind FROM flags")}
    assert "unsafe_member" not in kinds


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("where", ["original", "shorter", "longer"])
def test_real_venvs_restore_and_run_at_every_prefix(pod_vault, tmp_path, kind, where):
    name = f"{kind}-env"
    targets = {
        "original": pod_vault.workspace / name,
        "shorter": tmp_path / "e" / kind[:2],
        "longer": tmp_path / ("a-much-longer-prefix-" + "y" * 60) / name,
    }
    target = targets[where]
    args = [name] if where == "original" else [name, "--prefix", str(target)]
    try:
        r = pod_vault(*args, "--json")
        assert r.code == 0, r.err + r.out
        done = json.loads(r.out)["restored"][0]
        assert done["target"] == str(target) and done["python"]["base"] == _interpreter_link(target)
        assert_runs_at(target)
        row = sqlite3.connect(pod_vault.catalog).execute("SELECT status FROM restores").fetchall()
        assert row == [("ok",)]
    finally:
        shutil.rmtree(pod_vault.workspace, ignore_errors=True)


def test_missing_base_python_is_exit_6_naming_both_and_python_option_moves_the_venv(pod_vault, tmp_path):
    """The venv's base interpreter is gone here: exit 6 before anything is written; --python names another
    Python of the same major.minor, and the venv runs on it (pyvenv.cfg and the links say it)."""
    # make the recorded base interpreter missing: a copy of the catalog whose link targets point nowhere
    conn = sqlite3.connect(pod_vault.catalog)
    rows = conn.execute("SELECT rowid, link_target FROM members WHERE path LIKE 'uv-env/bin/python%' "
                        "AND link_target LIKE '/%'").fetchall()  # fmt: skip
    assert rows
    old_home = rows[0][1]
    conn.execute("UPDATE members SET link_target = '/nonexistent/bin/python3' WHERE rowid = ?", (rows[0][0],))
    conn.commit()
    conn.close()
    target = tmp_path / "uv-moved"
    r = pod_vault("uv-env", "--prefix", str(target))
    assert r.code == 6, r.err
    assert "/nonexistent/bin/python3" in r.err and "is not here" in r.err and "--python" in r.err
    assert not target.exists() and not any(p.name.startswith(".uv-moved") for p in tmp_path.iterdir())
    # another python of the same major.minor: a venv of it (its bin/python leads to the same base here)
    alt = tmp_path / "alt-python"
    _quiet([sys.executable, "-m", "venv", "--without-pip", str(alt)])
    r = pod_vault("uv-env", "--prefix", str(target), "--python", str(alt / "bin/python3"))
    assert r.code == 0, r.err
    assert os.readlink(target / "bin/python") == str(alt / "bin/python3")
    cfg = (target / "pyvenv.cfg").read_text()
    assert f"home = {alt}/bin" in cfg and old_home not in cfg.replace(f"{alt}", "")
    assert_runs_at(target)


def test_python_of_another_minor_is_refused(pod_vault, tmp_path):
    fake = tmp_path / "python-other"
    fake.write_text('#!/bin/sh\necho \'[[2, 7, 18], "/usr", "/usr"]\'\n')
    fake.chmod(0o755)
    r = pod_vault("venv-env", "--prefix", str(tmp_path / "x"), "--python", str(fake))
    assert r.code == 2 and "Python 2.7.18" in r.err and f"Python {sys.version_info[0]}.{sys.version_info[1]}" in r.err
    assert not (tmp_path / "x").exists()


def test_several_venvs_in_one_archive_list_and_restore_by_name(pod_vault, tmp_path):
    r = pod_vault("--list", "--json")
    assert r.code == 0, r.err
    names = {e["name"]: e for e in json.loads(r.out)["envs"]}
    assert {"alpha", "beta", "venv-env", "virtualenv-env", "uv-env"} <= set(names)
    assert names["alpha"]["prefix"] == str(pod_vault.workspace / "many/alpha")
    r = pod_vault("beta", "--prefix", str(tmp_path / "b"))
    assert r.code == 0, r.err
    assert_runs_at(tmp_path / "b")
    assert not (tmp_path / "b/alpha").exists()
    r = pod_vault("alpha", "beta", "--to", str(tmp_path / "tree"))
    assert r.code == 0, r.err
    for env in ("alpha", "beta"):
        assert_runs_at(tmp_path / "tree/many" / env)


def _tar(entries: list[tuple[str, str, bytes | str]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for path, kind, data in entries:
            info = tarfile.TarInfo(path)
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _unsafe(raw: bytes) -> list[str]:
    scan = ArchiveScan(io.BytesIO(__import__("zstandard").ZstdCompressor().compress(raw)))
    list(scan)
    return [f.member for f in scan.result.flags if f.kind == "unsafe_member"]


def test_scan_interpreter_links_of_a_venv_are_not_damage_others_are():
    cfg = ("env/pyvenv.cfg", "file", b"home = /usr/bin\nversion = 3.12.3\n")
    links = [("env/bin/python", "link", "/usr/bin/python3.12"), ("env/bin/python3", "link", "python")]
    assert _unsafe(_tar([*links, cfg])) == []  # pyvenv.cfg after bin/: still a venv
    assert _unsafe(_tar(links)) == ["env/bin/python", "env/bin/python3"]  # no pyvenv.cfg: links leading out
    through = ("env/bin/python3/evil", "file", b"x")  # written through the link: always refused
    assert _unsafe(_tar([*links, cfg, through])) == ["env/bin/python3/evil"]
    other = ("env/bin/tool", "link", "/usr/bin/tool")  # not an interpreter link
    assert _unsafe(_tar([cfg, *links, other, ("env/lib/python", "link", "/usr/bin/python3")])) == [
        "env/bin/tool",
        "env/lib/python",
    ]


def test_a_member_whose_bytes_are_not_the_catalogs_is_exit_5_and_nothing_placed(pod_vault, tmp_path):
    """The parallel writers check every file's BLAKE3 against the catalog: one that differs stops the restore."""
    conn = sqlite3.connect(pod_vault.catalog)
    conn.execute("UPDATE members SET blake3 = ? WHERE path = 'venv-env/pyvenv.cfg'", ("0" * 64,))
    conn.commit()
    conn.close()
    target = tmp_path / "out/venv-env"
    r = pod_vault("venv-env", "--prefix", str(target))
    assert r.code == 5 and "pyvenv.cfg" in r.err, r.err
    assert list((tmp_path / "out").iterdir()) == []
    rows = sqlite3.connect(pod_vault.catalog).execute("SELECT status FROM restores").fetchall()
    assert rows == [("failed",)]
