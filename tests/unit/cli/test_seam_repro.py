"""The seam of `vault repro`, `vault runs` and `vault compare`: each run() is short (options, one call, a view) and
the operations it calls are annotated to return typed results, never a dict. (A copy of test_seam.py's check
restricted to these three, until the lead folds them into it.)"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

CLI = Path(__file__).parents[3] / "cloudvault" / "cli"
MODULES = ["repro", "runs", "compare"]
RUN_LINES = 25


def _entry(tree: ast.Module) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")


def _operations_called(tree: ast.Module, run: ast.FunctionDef) -> dict[str, object]:
    """name -> the function of a layer below the CLI that run() calls (classes: options objects, left out)."""
    imported = {}
    for node in ast.walk(tree):
        below_cli = isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cloudvault.")
        if below_cli and not node.module.startswith("cloudvault.cli"):
            imported.update({a.asname or a.name: (node.module, a.name) for a in node.names})
    called = {}
    for node in ast.walk(run):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in imported:
            module, name = imported[f.id]
            called[f.id] = _imported(module, name)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in imported:
            module, name = imported[f.value.id]
            called[f"{f.value.id}.{f.attr}"] = getattr(_imported(module, name), f.attr)
    return {name: obj for name, obj in called.items() if not inspect.isclass(obj)}


def _imported(module: str, name: str):
    found = importlib.import_module(module)
    return getattr(found, name) if hasattr(found, name) else importlib.import_module(f"{module}.{name}")


def _seam_problems(module: str) -> list[str]:
    tree = ast.parse((CLI / f"{module}.py").read_text())
    run = _entry(tree)
    problems = []
    if (lines := run.end_lineno - run.lineno + 1) > RUN_LINES:
        problems.append(f"run() is {lines} lines (at most {RUN_LINES}: options, one call, a view)")
    operations = _operations_called(tree, run)
    if len(operations) != 1:
        problems.append(f"run() calls {len(operations)} operations ({sorted(operations)}), not one")
    for name, function in operations.items():
        returns = inspect.signature(function).return_annotation
        if returns is inspect.Signature.empty:
            problems.append(f"{name}() has no return annotation")
        elif re.search(r"\b(dict|Dict|Mapping)\b", str(returns)):
            problems.append(f"{name}() returns {returns}")
    return problems


@pytest.mark.parametrize("module", MODULES)
def test_the_command_runs_options_one_typed_operation_and_a_view(module):
    problems = _seam_problems(module)
    assert problems == [], f"cli/{module}.py: {problems}"


@pytest.mark.parametrize("module", MODULES)
def test_the_command_module_holds_no_orchestration_beside_run(module):
    """Besides run(), a command module holds its grammar and the parsing of options: no function of it calls an
    operation of a layer below (the repeat loop, the collect, the compare pipeline live in cloudvault/repro/)."""
    tree = ast.parse((CLI / f"{module}.py").read_text())
    calling = [f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.name != "run"
               and not f.name.startswith(("add_arguments", "_options")) and _operations_called(tree, f)]  # fmt: skip
    assert calling == [], f"cli/{module}.py: {calling} call operations beside run()"


@pytest.mark.parametrize("module", MODULES)
def test_no_operation_the_command_module_calls_returns_a_dict(module):
    """From any of its functions (the parsing of options included), as test_seam.py's _dict_returns checks."""
    tree = ast.parse((CLI / f"{module}.py").read_text())
    problems = []
    for function in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        for name, operation in _operations_called(tree, function).items():
            returns = inspect.signature(operation).return_annotation
            if returns is inspect.Signature.empty or re.search(r"\b(dict|Dict|Mapping)\b", str(returns)):
                problems.append(f"{function.name}: {name}() returns {returns}")
    assert problems == [], f"cli/{module}.py"


@pytest.mark.parametrize("module", MODULES)
def test_the_command_module_reads_no_result_by_string_key(module):
    text = (CLI / f"{module}.py").read_text()
    reads = re.findall(r"\b\w+\[[\"']\w+[\"']\]", text)
    assert reads == [], f"cli/{module}.py reads results by string key: {reads[:10]}"
