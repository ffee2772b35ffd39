"""The fault suite: hostile inputs, corruptions, kills and bad arguments, tallied for the closing summary line."""

from __future__ import annotations

import collections

import pytest

TALLY: collections.Counter = collections.Counter()


@pytest.fixture
def tally():
    """tally("hostile"), tally("corruption"), tally("kill"), tally("bad_argument"), tally("traceback", 0) ..."""

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
