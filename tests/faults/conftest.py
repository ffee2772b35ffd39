"""The fault suite: hostile inputs, corruptions, kills and bad arguments, tallied for the closing summary line."""

from __future__ import annotations

import collections

import pytest

TALLY: collections.Counter = collections.Counter()


@pytest.fixture
def tally():
    """tally("hostile_input"), tally("corruption"), tally("kill"), tally("bad_argument") count what was tried;
    tally("write_outside", n), tally("rows_lost", n), tally("secret_leak", n), tally("traceback", n) count what a
    test measured (n computed from what it looked at, before it asserts n is 0), never a zero it was told."""

    def count(kind: str, n: int = 1) -> None:
        TALLY[kind] += n

    return count


def pytest_terminal_summary(terminalreporter):
    if not TALLY:
        return
    tried = ", ".join(
        f"{TALLY[k]} {k.replace('_', ' ')}s" for k in ("hostile_input", "corruption", "kill", "bad_argument")
    )
    found = ", ".join(
        f"{TALLY[k]} {label}"
        for k, label in (
            ("write_outside", "writes outside a destination"),
            ("rows_lost", "catalog rows lost"),
            ("secret_leak", "secrets found in the catalog or any output"),
            ("traceback", "tracebacks"),
        )
    )
    terminalreporter.write_line(f"fault suite: tried {tried}; found {found}")


@pytest.fixture
def own_mirror(demo_mirror, tmp_path, vault):
    """A private copy of the demo mirror and a catalog of it: a test may attack it (and find it damaged) alone.
    (mirror root, catalog path)."""
    import shutil

    root = tmp_path / "own/Marvell_cloud"
    shutil.copytree(demo_mirror, root, symlinks=True)
    db = tmp_path / "own.db"
    r = vault("--catalog", str(db), "index", "--mirror", "marvell_cloud", "--quiet", str(root))
    assert r.code == 0, r.err
    return root, db
