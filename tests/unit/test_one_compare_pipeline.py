"""One compare-and-report pipeline (repro/judge.py), used by `vault compare` and by `vault repro`: neither command
module nor repro/run.py calls the compare or the report writers itself; the terminal table is a view in cli/, and
no operation imports rich."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "cloudvault"
PIPELINE = {"compare_runs", "settings_differences", "baseline_differences", "report_md", "compare_csv", "write_plot"}
OWNERS = {"repro/judge.py", "repro/compare.py", "repro/report.py"}  # the pipeline, and what it is made of


def names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(tree)
            if isinstance(n, ast.Attribute | ast.Name)}  # fmt: skip


def test_the_compare_pipeline_is_called_only_through_judge():
    users = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in OWNERS and (used := names_used(path) & PIPELINE):
            users[rel] = sorted(used)
    assert users == {}


def test_only_the_cli_draws_on_a_terminal():
    drawing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [module or ""]
            if any(n == "rich" or n.startswith("rich.") for n in names) and not rel.startswith("cli/"):
                drawing.append(rel)
    assert drawing == []


def test_the_dry_run_reads_the_plans_cores_not_their_text():
    text = (PACKAGE / "cli/repro.py").read_text()
    assert '["cpu_cores"].split' not in text and "['cpu_cores'].split" not in text
