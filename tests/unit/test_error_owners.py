"""Where error classes live, as docs/architecture.md says: errors.py holds the exit-code groups and the errors
several layers raise; every other error class lives beside its owner (the module or package whose thing it is
about), and only that package, or a layer above it, raises it. Each is a VaultError whose docstring is its
one-line message and which carries its group's exit code."""

from __future__ import annotations

import importlib
import inspect
import re

from cloudvault.errors import VaultError
from tests.unit.test_imports import PACKAGE, PROGRAMS, layer, module_names


def error_classes() -> dict[str, list[type]]:
    """module name -> the VaultError subclasses it defines (outside errors.py)."""
    found = {}
    for name in module_names():
        if name in ("cloudvault.errors", "cloudvault.__main__") or name.startswith(PROGRAMS):
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional extra (fuse, datasette) this environment lacks
            continue
        mine = [c for c in vars(module).values()
                if inspect.isclass(c) and issubclass(c, VaultError) and c.__module__ == name]  # fmt: skip
        if mine:
            found[name] = mine
    return found


def source(name: str) -> str:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()


def package(name: str) -> str:
    """cloudvault.restore.env.source -> cloudvault.restore (a top folder); cloudvault.readers -> itself."""
    return ".".join(name.split(".")[:2])


def test_every_error_is_raised_only_by_its_owners_package_or_from_above():
    found = error_classes()
    assert found, "no error class found outside errors.py: the check sees nothing"
    names = module_names()
    misplaced = []
    for owner, classes in found.items():
        for cls in classes:
            made = re.compile(rf"\b{cls.__name__}\(")
            for name in names:
                if package(name) == package(owner) or layer(name) > layer(owner) or name.startswith(PROGRAMS):
                    continue
                if made.search(source(name)):
                    misplaced.append(f"{cls.__name__} ({owner}) is raised by {name}: move it down to errors.py")
    assert misplaced == []


def test_every_error_has_its_message_and_its_groups_exit_code():
    for owner, classes in error_classes().items():
        for cls in classes:
            assert (cls.__doc__ or "").strip(), f"{owner}.{cls.__name__} has no message (its docstring)"
            assert isinstance(cls.exit_code, int) and cls.exit_code, f"{owner}.{cls.__name__} has no exit code"
