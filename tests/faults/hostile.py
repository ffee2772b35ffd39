"""What the fault tests share: the state of a mirror (to see a write into it) and hostile recipes."""

from __future__ import annotations

import os
from pathlib import Path


def mirror_state(root) -> dict:
    """Every path under root with its kind, size, mtime and inode: what a write into the mirror would change."""
    state = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            state[os.path.relpath(path, root)] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
    return state


def changed(before: dict, after: dict) -> list[str]:
    """Paths added, removed or rewritten between two mirror_state()s."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def hostile_recipe(tmp_path, monkeypatch, name: str, base: str, edit) -> str:
    """A copy of recipes/repro/BASE.toml, edited (edit: text -> text), found by the name NAME through VAULT_RECIPES."""
    text = (Path(__file__).parents[2] / f"recipes/repro/{base}.toml").read_text()
    folder = tmp_path / "recipes/repro"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(edit(text))
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "recipes"))
    return name
