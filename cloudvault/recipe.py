"""Recipes: TOML files saying how to restore an env or image or replay an experiment, found and validated here.

A recipe of kind K named N is `recipes/K/N.toml` shipped with vault, or `N.toml` under `$VAULT_RECIPES/K/` (the
user's own, searched first), or a path to a .toml file. Validation names the bad key in one line (exit 2).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from cloudvault.errors import RecipeInvalid, RecipeNotFound

RECIPES_ENV = "VAULT_RECIPES"
ANY = "*"  # in a schema: a table whose keys are free, each value checked against the schema under ANY


@dataclass(frozen=True)
class Required:
    """In a schema: a key the table must have, its value checked against spec (a key not wrapped is optional)."""

    spec: object


def recipe_dirs(kind: str) -> list[Path]:
    """Where recipes of a kind are looked for, the user's first."""
    dirs = [Path(d) / kind for d in os.environ.get(RECIPES_ENV, "").split(os.pathsep) if d]
    dirs.append(Path(str(resources.files("cloudvault.recipe_files"))) / kind)
    return dirs


def recipe_names(kind: str) -> list[str]:
    names: dict[str, None] = {}
    for folder in recipe_dirs(kind):
        if folder.is_dir():
            names.update((p.stem, None) for p in sorted(folder.glob("*.toml")))
    return list(names)


def find_recipe(kind: str, name: str) -> Path:
    """The recipe file: a path to a .toml, an exact name, or a unique name prefix."""
    if name.endswith(".toml"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise RecipeNotFound(kind=kind, name=name, hint="")
        return path
    names = recipe_names(kind)
    picked = [n for n in names if n == name] or [n for n in names if n.startswith(name)]
    if len(picked) != 1:
        import difflib

        close = picked or difflib.get_close_matches(name, names, n=3, cutoff=0.4)
        hint = f"; {'it names several' if len(picked) > 1 else 'did you mean'}: {', '.join(close)}" if close else ""
        raise RecipeNotFound(kind=kind, name=name, hint=hint or f"; known: {', '.join(names) or 'none'}")
    return next(
        folder / f"{picked[0]}.toml" for folder in recipe_dirs(kind) if (folder / f"{picked[0]}.toml").is_file()
    )


def load_recipe(kind: str, name: str, schema: dict) -> tuple[Path, dict]:
    """The recipe's path and its data, checked against schema (see check)."""
    import tomllib  # here: the modules that declare a schema import this one, and need no parser until a load

    path = find_recipe(kind, name)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RecipeInvalid(path=path, detail=f"not valid TOML: {exc}") from None
    check(data, schema, path)
    return path, data


def check(data: dict, schema: dict, path: Path | str, where: str = "") -> None:
    """schema maps key -> spec: a type, a tuple of types, or a nested schema dict (a table), wrapped in Required
    where the key must be there. Unknown keys, missing required keys and values of the wrong type are
    RecipeInvalid naming the key."""
    for key, value in data.items():
        spec = schema.get(key, schema.get(ANY))
        name = f"{where}{key}"
        if spec is None:
            raise RecipeInvalid(
                path=path, detail=f"unknown key {name!r} (known: {', '.join(k for k in schema if k != ANY)})"
            )
        kind = spec.spec if isinstance(spec, Required) else spec
        if isinstance(kind, dict):
            if not isinstance(value, dict):
                raise RecipeInvalid(path=path, detail=f"{name!r} must be a table")
            check(value, kind, path, name + ".")
        elif kind is float and isinstance(value, int | float) and not isinstance(value, bool):
            continue
        elif not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            wanted = getattr(kind, "__name__", None) or " or ".join(k.__name__ for k in kind)
            raise RecipeInvalid(path=path, detail=f"{name!r} must be {wanted}, not {type(value).__name__}")
    for key, spec in schema.items():
        if key != ANY and isinstance(spec, Required) and key not in data:
            raise RecipeInvalid(path=path, detail=f"missing required key {where}{key!r}")
