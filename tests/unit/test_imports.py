"""Every module of the package imports on its own in a fresh interpreter, and no two modules import each other in a
circle: neither by module-level imports (the ones that run at import time) nor counting the imports inside
functions, which hide a cycle as well as they break it at import time."""

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


def module_imports(name: str, known: set[str], *, in_functions: bool = False) -> set[str]:
    """The package's modules that name imports at module level (and, in_functions, inside its functions too)."""
    path = PACKAGE.parent / Path(*name.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    found = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree) if in_functions else tree.body:
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


def test_no_cycle_counting_the_imports_inside_functions():
    names = set(module_names())
    graph = {name: module_imports(name, names, in_functions=True) for name in names}
    assert cycle(graph) is None


# docs/architecture.md's layers, highest first: cli -> operations -> io / catalog / archive -> tools -> base
LAYERS = {"cli": 4, "index": 3, "extract": 3, "verify": 3, "diff": 3, "optimize": 3, "restore": 3, "repro": 3,
          "search": 3, "listing": 3, "known_mirrors": 3, "browse": 3, "mount": 3, "grep": 3, "demo": 3,
          "catalog": 2, "archive": 2, "io": 2, "tools": 1}  # fmt: skip


def layer(module: str) -> int:
    """A module's layer: its top folder's (or cli's for __main__), 0 for the base modules beside them."""
    top = module.split(".")[1] if "." in module else ""
    return 4 if top == "__main__" else LAYERS.get(top, 0)


def test_every_import_goes_down_a_layer_functions_included():
    names = set(module_names())
    upward = sorted(f"{name} -> {m}" for name in names for m in module_imports(name, names, in_functions=True)
                    if layer(m) > layer(name))  # fmt: skip
    assert upward == []
    assert layer("cloudvault.cli.main") > layer("cloudvault.repro.run") > layer("cloudvault.catalog.db")
    assert layer("cloudvault.catalog.db") > layer("cloudvault.tools.slurm") > layer("cloudvault.atomic")


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
