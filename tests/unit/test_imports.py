"""Every module of the package imports on its own in a fresh interpreter, and no two modules import each other in a
circle (module-level imports, the ones that run at import time)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cloudvault

PACKAGE = Path(cloudvault.__file__).parent
# modules whose import needs an optional outside package (datasette for browse/, fuse for mount/); __main__ runs vault
OPTIONAL = ("cloudvault.browse.", "cloudvault.mount.")


PROGRAMS = "cloudvault.demo.programs."  # the lab's scripts the demo ships: run as programs, never imported


def module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def module_imports(name: str, known: set[str]) -> set[str]:
    """The package's modules that name imports at module level (not inside functions)."""
    path = PACKAGE.parent / Path(*name.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{name}: the package imports absolutely"
            base = node.module or ""
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m in known and m != name}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in graph (a list of modules, first repeated last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_of_the_package_imports_itself_in_a_circle():
    names = set(module_names())
    graph = {name: module_imports(name, names) for name in names}
    assert cycle(graph) is None


def test_cycle_walk_finds_a_circle_when_there_is_one():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_every_module_imports_alone_in_a_fresh_interpreter():
    """Alone means first: a module that only imports once a sibling has been imported hides a cycle."""
    names = [n for n in module_names()
             if not n.startswith(OPTIONAL) and n != "cloudvault.__main__" and not n.startswith(PROGRAMS)]

    def imported_alone(name: str) -> str | None:
        r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, env=os.environ)
        return f"{name}: {r.stderr.strip()[-300:]}" if r.returncode else None

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        failed = [problem for problem in pool.map(imported_alone, names) if problem]
    assert failed == []


def test_every_package_folder_is_in_the_packages_a_plain_install_ships():
    """pyproject lists its packages by hand: a folder missing there is missing from `pip install .` (not editable)."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    assert folders - listed == set()
