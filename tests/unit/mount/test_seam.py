"""The mount's seam to the rest of vault: its child process starts through a private entry point (never the public
CLI grammar, which a renamed flag would break), the tree asks the catalog layer instead of running its own SQL, and
no two mount modules import each other, counting the imports inside functions."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cloudvault
from unit.test_imports import cycle

MOUNT = Path(cloudvault.__file__).parent / "mount"
ENTRY_POINT = "cloudvault.mount.serve"


def _sources() -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(MOUNT.glob("*.py"))}


def test_the_mount_package_never_writes_out_the_public_cli_grammar_nor_recovers_its_catalog_path():
    grammar = re.compile(r'"--foreground"|"-m",\s*"cloudvault"[,\]]|"mount",\s*"--|PRAGMA database_list')
    found = {name: grammar.findall(text) for name, text in _sources().items()}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_the_tree_asks_the_catalog_layer_and_runs_no_sql_of_its_own():
    text = (MOUNT / "tree.py").read_text(encoding="utf-8")
    calls = [node.func.attr for node in ast.walk(ast.parse(text))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)]  # fmt: skip
    assert [c for c in calls if c in ("execute", "executemany", "executescript")] == []
    assert not re.search(r"\bSELECT\b|\bFROM\b\s+\w+\s+(WHERE|JOIN|ORDER)", text)


def _imports_anywhere(name: str, known: set[str]) -> set[str]:
    """The package modules name imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse((MOUNT / f"{name.rsplit('.', 1)[1]}.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m in known and m != name}


def test_no_two_mount_modules_import_each_other_counting_imports_inside_functions():
    names = {f"cloudvault.mount.{p.stem}" for p in MOUNT.glob("*.py") if p.stem != "__init__"}
    graph = {name: _imports_anywhere(name, names) for name in names}
    assert cycle(graph) is None, cycle(graph)


def test_the_background_child_is_the_private_entry_point_with_this_python(monkeypatch, tmp_path):
    """start_background's child: `python -P -m cloudvault.mount.serve ...`, no word of the public grammar."""
    from cloudvault.mount import session

    started = []

    class Refused(Exception):
        pass

    def popen(argv, **kwargs):
        started.append(argv)
        raise Refused

    monkeypatch.setattr(subprocess, "Popen", popen)
    options = session.MountOptions(catalog=str(tmp_path / "c.db"), mountpoint=tmp_path / "m", entry="018",
                                   cache_mb=64, allow_flagged=True)  # fmt: skip
    with pytest.raises(Refused):
        session.start_background(options, tmp_path / "mount.log")
    argv = started[0]
    assert argv[:4] == [sys.executable, "-P", "-m", ENTRY_POINT]
    assert "--foreground" not in argv and "mount" not in argv
    assert session.MountOptions.from_argv(argv[4:]) == options


def test_the_private_entry_point_answers_a_bad_call_with_one_line_and_a_usage_exit():
    done = subprocess.run([sys.executable, "-P", "-m", ENTRY_POINT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
