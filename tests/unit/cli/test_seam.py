"""The seam is typed: a reshaped command module reads its operation's result by attribute, never r["key"]; the
formatting of results lives in cli/views/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CLI = Path(__file__).parents[3] / "cloudvault" / "cli"
RESHAPED = ["restore_env", "index_slurm", "repro", "runs", "compare",
            "verify", "extract", "search", "ls", "show", "info", "log", "diff"]  # fmt: skip


@pytest.mark.parametrize("module", RESHAPED)
def test_a_reshaped_command_module_reads_no_result_by_string_key(module):
    text = (CLI / f"{module}.py").read_text()
    reads = re.findall(r"\b\w+\[[\"']\w+[\"']\]", text)
    assert reads == [], f"cli/{module}.py reads results by string key: {reads[:10]}"
