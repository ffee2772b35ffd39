"""A home where `vault demo` ran, as the README's first command leaves it: the docs' examples run there."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import REPO


@pytest.fixture(scope="module")
def after_demo(tmp_path_factory):
    """A home where `vault demo` was run, as the README's first command runs it."""
    home = tmp_path_factory.mktemp("home")
    mp = pytest.MonkeyPatch()
    mp.setenv("HOME", str(home))
    mp.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    mp.delenv("VAULT_CATALOG", raising=False)
    mp.chdir(home)
    from cloudvault.cli.main import main

    assert main(["demo"]) == 0
    yield home
    mp.undo()


@pytest.fixture
def in_demo_home(after_demo, monkeypatch):
    """This test runs in the home `vault demo` left (its HOME, its default catalog, its folder)."""
    monkeypatch.setenv("HOME", str(after_demo))
    monkeypatch.setenv("XDG_DATA_HOME", str(after_demo / ".local" / "share"))
    monkeypatch.delenv("VAULT_CATALOG", raising=False)
    monkeypatch.chdir(after_demo)
    return after_demo


@pytest.fixture(scope="module")
def make_usage():
    """docs/make_usage.py as a module: the commands of the grammar and their --help, as the Usage blocks show them."""
    spec = importlib.util.spec_from_file_location("make_usage", REPO / "docs" / "make_usage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
