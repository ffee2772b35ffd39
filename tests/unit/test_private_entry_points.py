"""Work that runs in another process (a Slurm job, a runner, the mount's child) starts through a private entry
point (`python -P -m cloudvault.<area>.<task>`), never through the public grammar: outside cli/, no argv runs
`python -m cloudvault ...`, and no module writes out a mode flag of a vault command. Renaming a flag must not
break a queued job, and this test is what sees it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "cloudvault"
MODE_FLAGS = {"--merge", "--foreground", "--resume", "--status", "--slurm"}  # vault's own; no other tool's


def grammar_written_out(path: Path) -> list[str]:
    """Each place in path that starts the public grammar or writes one of its mode flags, as 'line: what'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.List | ast.Tuple):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if any(a == "-m" and b == "cloudvault" for a, b in zip(words, words[1:], strict=False)):
                found.append(f"{node.lineno}: runs `python -m cloudvault` (the public grammar)")
        if isinstance(node, ast.Constant) and node.value in MODE_FLAGS:
            found.append(f"{node.lineno}: writes {node.value}")
    return found


def test_no_operation_starts_a_process_through_the_public_grammar():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("cli/"):
            continue
        if problems := grammar_written_out(path):
            found[rel] = problems
    assert found == {}


def test_the_check_sees_what_it_looks_for(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('import sys\nargv = [sys.executable, "-P", "-m", "cloudvault", "index", "--merge"]\n')
    assert grammar_written_out(probe) == ["2: runs `python -m cloudvault` (the public grammar)", "2: writes --merge"]


def command_lines_written_out(path: Path) -> list[str]:
    """Each list or tuple in path that starts as a `vault` command line does: a command's name, then a word."""
    from cloudvault.cli.main import COMMANDS

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.List | ast.Tuple) and len(node.elts) >= 2:
            first, second = node.elts[:2]
            words = all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in (first, second))
            if words and first.value in COMMANDS:
                found.append(f"{node.lineno}: `vault {first.value} {second.value} ...`")
    return found


def test_no_command_line_of_vault_s_grammar_is_written_outside_cli():
    """The demo's journeys, like every argv of vault's own, are written in cli/: a renamed flag is seen there."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith("cli/") and (problems := command_lines_written_out(path)):
            found[rel] = problems
    assert found == {}


def test_the_command_line_check_sees_one(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('steps = [["restore", "env", "nebius", "--list"], ("search", "granite")]\n')
    assert command_lines_written_out(probe) == ["1: `vault restore env ...`", "1: `vault search granite ...`"]
