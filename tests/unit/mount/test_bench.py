"""bench/mount.py measures what `pip install .` installs: the vault beside its Python (or VAULT's), run as its
console script with no PYTHONPATH, so the source tree never shadows the installed package (the tree has no
cloudvault/manifests: a plain install does, by package-dir)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from conftest import REPO, bench_module


def _bench():
    return bench_module("mount")


def test_the_bench_runs_the_vault_installed_beside_its_python_with_no_pythonpath(monkeypatch, tmp_path):
    bench = _bench()
    assert bench.installed("vault") == str(Path(sys.executable).parent / "vault")
    started = []

    class Started(Exception):
        pass

    def popen(cmd, **kwargs):
        started.append((cmd, kwargs.get("env")))
        raise Started

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setattr(bench.subprocess, "Popen", popen)
    with contextlib.suppress(Started):
        bench.Mount(["/venv/bin/vault", "mount", "--foreground", str(tmp_path / "p")], tmp_path / "p", tmp_path)
    cmd, env = started[0]
    assert cmd[0] == "/venv/bin/vault" and env is not None and "PYTHONPATH" not in env


def test_a_catalog_kept_in_bench_work_is_indexed_again_when_another_vault_made_it(monkeypatch, tmp_path):
    """BENCH_WORK keeps each vault's catalog for the next run; one made by another install (an older vault, whose
    piece BLOBs lacked the first parts) made that vault's pzstd first byte ~1.25x slower (3.6 against 2.9 ms), which
    looked like an order effect. A catalog is reused only by the install that indexed it."""
    bench = _bench()
    (tmp_path / "mirror").mkdir()
    ran = []
    monkeypatch.setattr(bench.subprocess, "run", lambda cmd, **kw: ran.append(cmd) or Path(cmd[2]).write_text("db"))

    class Mounted:
        seconds = 1.0

        def __init__(self, *args) -> None:
            pass

        def close(self) -> None:
            pass

    monkeypatch.setattr(bench, "Mount", Mounted)
    old, new = tmp_path / "old-vault", tmp_path / "new-vault"
    for script in (old, new):
        script.write_text("#!/bin/sh\n")
    bench.prepare(tmp_path, [str(old)], ["ratarmount"])
    assert [cmd[0] for cmd in ran] == [str(old)]
    bench.prepare(tmp_path, [str(old)], ["ratarmount"])  # the same install: its catalog reused
    assert len(ran) == 1
    (tmp_path / "catalog0.db-wal").write_text("wal")
    bench.prepare(tmp_path, [str(new)], ["ratarmount"])  # another install: indexed again, from nothing
    assert [cmd[0] for cmd in ran] == [str(old), str(new)] and not (tmp_path / "catalog0.db-wal").exists()
