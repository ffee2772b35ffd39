"""The seam is typed: a reshaped command module reads its operation's result by attribute, never r["key"]; the
formatting of results lives in cli/views/; its run() is short (options, one call, a view) and the operations it
calls are annotated to return typed results, never a dict."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

CLI = Path(__file__).parents[3] / "cloudvault" / "cli"
RESHAPED = ["restore_env", "index_slurm", "repro", "runs", "compare",
            "verify", "extract", "search", "ls", "show", "info", "log", "diff",
            "index", "grep", "mirrors", "optimize",
            "restore_docker", "browse", "demo", "mount", "umount"]  # fmt: skip
RUN_LINES = 25  # restore_env's run() (three modes, one call each) is 24 lines
STILL_ORCHESTRATING: dict[str, str] = {}  # run() not yet options, one call, a view (none left)
STILL_UNTYPED: dict[str, str] = {}  # an operation the module calls still returns a dict (none left)


@pytest.mark.parametrize("module", RESHAPED)
def test_a_reshaped_command_module_reads_no_result_by_string_key(module):
    text = (CLI / f"{module}.py").read_text()
    reads = re.findall(r"\b\w+\[[\"']\w+[\"']\]", text)
    assert reads == [], f"cli/{module}.py reads results by string key: {reads[:10]}"


SHORT_RUN = RESHAPED


@pytest.mark.parametrize("module", SHORT_RUN)
def test_a_reshaped_command_run_is_short_and_formats_nothing(module):
    """run(): options, one operation call, the view; no line written by the command module itself."""
    import ast

    text = (CLI / f"{module}.py").read_text()
    runs = [f for f in ast.walk(ast.parse(text)) if isinstance(f, ast.FunctionDef) and f.name.startswith("run")]
    assert runs, f"cli/{module}.py has no run()"
    for f in runs:
        lines = f.end_lineno - f.lineno + 1
        assert lines <= RUN_LINES, f"cli/{module}.py {f.name}() is {lines} lines"
    assert not re.findall(r"ui\.line\(|ui\.emit\(|human_size\(", text), f"cli/{module}.py formats output itself"


def _entries(tree: ast.Module) -> list[ast.FunctionDef]:
    """The command's run(), or the run_MODE() of each of its modes (index_slurm's, which cli/index.py hands on)."""
    runs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and (n.name == "run" or n.name.startswith("run_"))]
    assert runs, "no run()"
    return runs


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


def _run_problems(module: str) -> list[str]:
    """What keeps the command's run() from being options, one call, a view: its length, or no operation called."""
    tree = ast.parse((CLI / f"{module}.py").read_text())
    problems = []
    for run in _entries(tree):
        if (lines := run.end_lineno - run.lineno + 1) > RUN_LINES:
            problems.append(f"{run.name}() is {lines} lines (at most {RUN_LINES}: options, one call, a view)")
        if not _operations_called(tree, run):
            problems.append(f"{run.name}() calls no operation")
    return problems


def _dict_returns(module: str) -> list[str]:
    """Each operation the module calls (from any of its functions) that is not annotated to return a typed result."""
    tree = ast.parse((CLI / f"{module}.py").read_text())
    problems = []
    for function in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        for name, operation in _operations_called(tree, function).items():
            returns = inspect.signature(operation).return_annotation
            if returns is inspect.Signature.empty:
                problems.append(f"{name}() has no return annotation")
            elif re.search(r"\b(dict|Dict|Mapping)\b", str(returns)):
                problems.append(f"{name}() returns {returns}")
    return problems


def _expected_to_fail(modules: list[str], reasons: dict[str, str]) -> list:
    return [pytest.param(m, marks=pytest.mark.xfail(strict=True, reason=reasons[m])) if m in reasons else m
            for m in modules]  # fmt: skip


@pytest.mark.parametrize("module", _expected_to_fail(RESHAPED, STILL_ORCHESTRATING))
def test_a_reshaped_commands_run_is_options_one_operation_and_a_view(module):
    assert _run_problems(module) == [], f"cli/{module}.py"


@pytest.mark.parametrize("module", _expected_to_fail(RESHAPED, STILL_UNTYPED))
def test_no_operation_a_reshaped_command_calls_returns_a_dict(module):
    assert _dict_returns(module) == [], f"cli/{module}.py"


def test_the_seam_checks_see_a_long_run_and_an_operation_that_returns_a_dict(tmp_path, monkeypatch):
    """The checks themselves can fail: a run() of 30 lines calling an operation annotated `-> dict`."""
    body = "\n".join(f"    x{i} = {i}" for i in range(28))
    (tmp_path / "fake.py").write_text(
        "from cloudvault.restore.env.meta import torch_version_file\n\n\ndef run(args):\n" + body
        + "\n    return torch_version_file(args)\n"
    )
    monkeypatch.setattr(f"{__name__}.CLI", tmp_path)
    assert _run_problems("fake") == ["run() is 30 lines (at most 25: options, one call, a view)"]
    assert _dict_returns("fake") == ["torch_version_file() returns dict"]


def test_every_command_is_held_to_the_seam():
    """Each command module vault's grammar names (COMMANDS, SUB_VERBS, restore's two kinds) is in RESHAPED, so the
    checks above cover every command, not the ones that happened to be reshaped."""
    from cloudvault.cli.main import COMMANDS, SUB_VERBS

    named = {m.rsplit(".", 1)[1] for m in COMMANDS.values()}
    named |= {m.rsplit(".", 1)[1] for verbs in SUB_VERBS.values() for m in verbs.values()}
    named = (named - {"restore"}) | {"restore_env", "restore_docker"}  # `vault restore env|docker` hands on to them
    assert named - set(RESHAPED) == set()
