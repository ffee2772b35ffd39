"""Every test gets a clean environment (temp HOME and XDG dirs, no VAULT_CATALOG) and helpers for real tools."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cloudvault.cli.main import main

# Fixtures that start or reach a real service (dockerd and a registry, Slurm, sshd, an S3 server): a test using one
# is in the integration layer, which `pytest -m "not integration"` leaves out. Tests that reach a service
# without such a fixture (a real Slurm, a browser) carry @pytest.mark.integration themselves.
SERVICE_FIXTURES = frozenset({"services", "docker_host", "slurm", "sshd", "s3_server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    monkeypatch.delenv("VAULT_CATALOG", raising=False)
    yield


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


@pytest.fixture
def demo_catalog(demo_mirror, tmp_path, vault) -> Path:
    db = tmp_path / "catalog.db"
    result = vault("--catalog", str(db), "index", "--mirror", "marvell_cloud", "--quiet", str(demo_mirror))
    assert result.code == 0, result.err
    return db
