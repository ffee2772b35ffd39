"""bench/mount.py measures what `pip install .` installs: the vault beside its Python (or VAULT's), run as its
console script with no PYTHONPATH, so the source tree never shadows the installed package (the tree has no
cloudvault/manifests: a plain install does, by package-dir)."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

from conftest import REPO


def _bench():
    sys.path.insert(0, str(REPO / "bench"))
    try:
        spec = importlib.util.spec_from_file_location("bench_mount", REPO / "bench" / "mount.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "bench"))
    return module


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
