"""Every test gets a clean environment (temp HOME and XDG dirs, no VAULT_CATALOG) and helpers for real tools."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cloudvault.cli.main import main

REPO = Path(__file__).parents[1]
TESTS = Path(__file__).parent

# The layers, by folder: `pytest -m "not integration"` runs tests/unit and tests/cli alone (the fast layers); every
# other folder (integration, faults, docs) carries `integration` as well as its own marker, so it runs in the whole
# suite (CI, the README's test command) and is left out of the fast run.
LAYERS = {
    "unit": ("unit",),
    "cli": ("cli",),
    "integration": ("integration",),
    "faults": ("faults", "integration"),
    "docs": ("docs", "integration"),
}
FAST_LAYERS = frozenset({"unit", "cli"})
# Fixtures that start or reach a real service, and the service's marker: a test using one (directly or through
# another fixture) is marked with it and with `integration`, and must live outside the fast layers.
SERVICE_FIXTURES = {"services": "docker", "docker_host": "docker", "slurm": "slurm", "sshd": "ssh", "s3_server": "s3"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    misplaced = []
    for item in items:
        layer = item.path.relative_to(TESTS).parts[0] if item.path.is_relative_to(TESTS) else None
        if layer not in LAYERS:
            misplaced.append(f"{item.nodeid}: not in a layer folder ({', '.join(LAYERS)})")
            continue
        for name in LAYERS[layer]:
            item.add_marker(name)
        services = sorted({SERVICE_FIXTURES[f] for f in getattr(item, "fixturenames", ()) if f in SERVICE_FIXTURES})
        for name in services:
            item.add_marker(name)
        if layer in FAST_LAYERS and (services or item.get_closest_marker("integration")):
            misplaced.append(f"{item.nodeid}: reaches a service or is marked integration; it belongs outside {layer}/")
    if misplaced:
        raise pytest.UsageError("tests in the wrong layer:\n  " + "\n  ".join(misplaced))


@pytest.fixture(scope="session", autouse=True)
def private_state(tmp_path_factory):
    """Session fixtures (the demo indexed once) run before each test's clean_env: their mirror registry is a
    temp one too, never the user's own ~/.local/state."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
        yield


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local/state"))
    monkeypatch.delenv("VAULT_CATALOG", raising=False)
    yield


def bench_module(name: str):
    """bench/NAME.py loaded as a module (bench/ on sys.path meanwhile: a bench imports its neighbours); the
    environment it sets its defaults in (BENCH_*) is put back as it was."""
    import importlib.util

    environ = dict(os.environ)
    sys.path.insert(0, str(REPO / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "bench"))
        os.environ.clear()
        os.environ.update(environ)
    return module


def require(tool: str) -> str:
    """The tool's path; missing: skip, but with CI=true fail (CI must install it)."""
    path = shutil.which(tool)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is required in CI but is not installed")
        pytest.skip(f"{tool} not installed")
    return path


class VaultResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


@pytest.fixture
def fake_commands(tmp_path, monkeypatch):
    """fake_commands({name: bash body}): small scripts put first on PATH (a Slurm that answers as told)."""

    def put(scripts: dict[str, str]) -> None:
        bin_dir = tmp_path / "fake-commands"
        bin_dir.mkdir(exist_ok=True)
        for name, body in scripts.items():
            (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
            (bin_dir / name).chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    return put


@pytest.fixture
def vault(capsys):
    """Run the CLI in-process: vault('search', 'granite') -> VaultResult."""

    def run(*args: str) -> VaultResult:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return VaultResult(code, out, err)

    return run


def vault_subprocess(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cloudvault", *args], capture_output=True, text=True, **kw)


@pytest.fixture(scope="session")
def demo_mirror(tmp_path_factory) -> Path:
    from cloudvault.demo.build import build_demo

    return build_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="session")
def indexed_demo(demo_mirror, tmp_path_factory) -> Path:
    """The demo mirror indexed once a session (by `vault index`, as a user would); demo_catalog copies it."""
    db = tmp_path_factory.mktemp("demo-catalog") / "catalog.db"
    assert main(["--catalog", str(db), "index", "--mirror", "marvell_cloud", "--quiet", str(demo_mirror)]) == 0
    return db


@pytest.fixture
def demo_catalog(indexed_demo, tmp_path) -> Path:
    """A test's own copy of the indexed demo catalog (SQLite's backup: whole pages, whatever the journal holds)."""
    db = tmp_path / "catalog.db"
    source, copy = sqlite3.connect(indexed_demo), sqlite3.connect(db)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    return db
