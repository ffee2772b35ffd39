"""The seam is typed: a reshaped command module reads its operation's result by attribute, never r["key"]; the
formatting of results lives in cli/views/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CLI = Path(__file__).parents[3] / "cloudvault" / "cli"
RESHAPED = ["restore_env", "index_slurm", "repro", "runs", "compare",
            "verify", "extract", "search", "ls", "show", "info", "log", "diff",
            "index", "grep", "mirrors", "optimize"]  # fmt: skip


@pytest.mark.parametrize("module", RESHAPED)
def test_a_reshaped_command_module_reads_no_result_by_string_key(module):
    text = (CLI / f"{module}.py").read_text()
    reads = re.findall(r"\b\w+\[[\"']\w+[\"']\]", text)
    assert reads == [], f"cli/{module}.py reads results by string key: {reads[:10]}"


SHORT_RUN = ["index", "index_slurm", "grep", "mirrors", "optimize"]


@pytest.mark.parametrize("module", SHORT_RUN)
def test_a_reshaped_command_run_is_short_and_formats_nothing(module):
    """run(): options, one operation call, the view; no line written by the command module itself."""
    import ast

    text = (CLI / f"{module}.py").read_text()
    runs = [f for f in ast.walk(ast.parse(text)) if isinstance(f, ast.FunctionDef) and f.name.startswith("run")]
    assert runs, f"cli/{module}.py has no run()"
    for f in runs:
        assert f.end_lineno - f.lineno + 1 <= 20, f"cli/{module}.py {f.name}() is {f.end_lineno - f.lineno + 1} lines"
    assert not re.findall(r"ui\.line\(|ui\.emit\(|human_size\(", text), f"cli/{module}.py formats output itself"
