"""`vault restore env` on the demo mirror's envs (listed, restored under another root, moved) and on hostile
archives (member paths and links that climb out: refused, nothing written). The real envs built with venv and pip
are tests/integration/test_restore_env.py."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import tarfile
from pathlib import Path

import pytest


def _run(exe: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, **kw)


@pytest.mark.parametrize(
    "files,links",
    [
        (("envs/evil/../../escape.txt",), ()),
        ((), (("envs/evil/lib/up", "../../..", tarfile.SYMTYPE),)),
        ((), (("envs/evil/lib/etc", "/etc", tarfile.SYMTYPE),)),
        ((), (("envs/evil/lib/pw", "../../../etc/passwd", tarfile.LNKTYPE),)),
        (("envs/evil/bin/../../../escape.txt",), ()),
        ((), (("envs/evil/lib/up", "..", tarfile.SYMTYPE), ("envs/evil/lib/up/up2", "..", tarfile.SYMTYPE))),
        ((), (("envs/evil/lib/x", "/opt/lab/envs/evil/..", tarfile.SYMTYPE),)),  # into the old prefix, then out
    ],
)
def test_hostile_member_paths_are_refused_with_nothing_written(tmp_path, vault, monkeypatch, files, links):
    from archives import hostile_archive

    mirror = tmp_path / "m"
    hostile_archive(mirror / "015_x/data/evil.tar.zst", ("envs/evil/conda-meta/x.json", *files), links)
    db = tmp_path / "c.db"
    vault("--catalog", str(db), "index", "-q", str(mirror))
    (tmp_path / "r/env").mkdir(parents=True)
    (tmp_path / "r/env/evil.toml").write_text('entry = "015"\narchives = "data/*.tar.zst"\nroot = "/opt/lab"\n')
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "r"))
    target = tmp_path / "out/a/b/evil"
    r = vault("--catalog", str(db), "restore", "env", "evil", "evil", "--prefix", str(target))
    assert r.code == 5 and "refusing" in r.err, r.err
    assert list((tmp_path / "out/a/b").iterdir()) == []
    assert not list(tmp_path.rglob("escape.txt")) and not (tmp_path / "out/etc").exists()


@pytest.mark.parametrize("parallel", [True, False])
def test_nothing_is_written_through_a_symlink_an_earlier_env_member_made(tmp_path, vault, monkeypatch, parallel):
    """lib/sub -> real lies inside the env, but a later member lib/sub/x would be written through it (io.landing)."""
    import io

    from cloudvault.restore.env import bulk as env_bulk

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, kind, body in (("envs/evil/conda-meta/x.json", tarfile.REGTYPE, b"{}"),
                                 ("envs/evil/lib/real", tarfile.DIRTYPE, b""),
                                 ("envs/evil/lib/sub", tarfile.SYMTYPE, b"real"),
                                 ("envs/evil/lib/sub/x", tarfile.REGTYPE, b"bad")):  # fmt: skip
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = body.decode()
            elif kind == tarfile.REGTYPE:
                info.size = len(body)
            tar.addfile(info, io.BytesIO(body) if kind == tarfile.REGTYPE else None)
    archive = tmp_path / "m/015_x/data/evil.tar.zst"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(subprocess.run(["zstd", "-q", "-c"], input=buf.getvalue(), capture_output=True,
                                       check=True).stdout)  # fmt: skip
    db = tmp_path / "c.db"
    vault("--catalog", str(db), "index", "-q", str(tmp_path / "m"))
    (tmp_path / "r/env").mkdir(parents=True)
    (tmp_path / "r/env/evil.toml").write_text('entry = "015"\narchives = "data/*.tar.zst"\nroot = "/opt/lab"\n')
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "r"))
    monkeypatch.setattr(env_bulk, "can_stage_in_parallel", lambda members: parallel)
    r = vault("--catalog", str(db), "restore", "env", "evil", "evil", "--prefix", str(tmp_path / "out/evil"))
    assert r.code == 5 and "through the symlink" in r.err, r.err
    assert list((tmp_path / "out").iterdir()) == []


def test_demo_mirror_envs_list_restore_under_another_root_and_move(demo_catalog, vault, tmp_path):
    db = str(demo_catalog)
    listed = vault("--catalog", db, "restore", "env", "nebius", "--list", "--json")
    envs = {e["name"]: e for e in json.loads(listed.out)["envs"]}
    assert envs["neo"]["gpu"]["fits"]["12.0"] is False and envs["vaultdemo"]["torch"] is None
    root = tmp_path / "miniforge3"
    r = vault("--catalog", db, "restore", "env", "nebius", "--to", str(root))
    assert r.code == 0, r.err
    for name in ("vaultdemo", "neo", "specdec", "probe"):  # specdec, probe: inside miniforge3-tree.tar.zst
        assert _run(root / "envs" / name / "bin/vault-demo-hello").stdout.strip() == f"hello from {root}/envs/{name}"
    assert _run(root / "bin/vault-demo-hello").stdout.strip() == f"hello from {root}"  # the tree's base, at ROOT
    assert "no kernels for compute capability 12.0" in r.err
    assert envs["base"]["archive"].endswith("miniforge3-tree.tar.zst") and envs["base"]["files"] < envs["neo"]["files"]
    alone = tmp_path / "base-alone"
    r = vault("--catalog", db, "restore", "env", "nebius", "base", "--prefix", str(alone))
    assert r.code == 0 and (alone / "conda-meta").is_dir() and list((alone / "envs").iterdir()) == [], r.err
    assert _run(alone / "bin/vault-demo-hello").stdout.strip() == f"hello from {alone}"
    moved = tmp_path / "moved/vaultdemo"
    r = vault(
        "--catalog",
        db,
        "restore",
        "env",
        "nebius",
        "vaultdemo",
        "--move",
        str(root / "envs/vaultdemo"),
        "--prefix",
        str(moved),
    )
    assert r.code == 0, r.err
    assert _run(moved / "bin/vault-demo-hello").stdout.strip() == f"hello from {moved}"
    r = vault("--catalog", db, "restore", "env", "runpod", "probe_mini", "--prefix", str(tmp_path / "w/probe_mini"))
    assert r.code == 0 and "/tmp and /root vanish when a pod stops" in r.out
    assert len(sqlite3.connect(db).execute("SELECT * FROM restores WHERE status = 'ok'").fetchall()) == 8
