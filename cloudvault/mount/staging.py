"""Recipe inputs taken from a mount (`[inputs.NAME] via = "mount"`): instead of verified copies, the run folder
gets links into a `vault mount` of the catalog made for the run (reads verified by the mount, the mirror
read-only through it), unmounted when the run ends. Local runs only: a container or a batch node does not see
this machine's mount."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from cloudvault.errors import RecipeInvalid
from cloudvault.models import Member

MOUNT_FOLDER = ".mount"
VIA = ("copy", "mount")


def via(recipe, name: str) -> str:
    """How the recipe's input `name` reaches the run: copy (staged, the default) or mount."""
    spec = recipe.section("inputs").get(name, {})
    how = spec.get("via", "copy") if isinstance(spec, dict) else "copy"
    if how not in VIA:
        raise RecipeInvalid(path=recipe.name, detail=f"inputs.{name}.via is {how!r}; it is one of {', '.join(VIA)}")
    return how


def link_inputs(conn: sqlite3.Connection, run_dir: Path, links: dict[Member, Path]) -> None:
    """Mount the catalog at run_dir/.mount and link each member's landing to it."""
    from cloudvault.catalog.db import catalog_file
    from cloudvault.mount import session
    from cloudvault.mount.tree import mirror_folders, mount_path

    point = run_dir / MOUNT_FOLDER
    point.mkdir(exist_ok=True)
    session.require_fuse()
    session.start_background(session.MountOptions(str(catalog_file(conn)), point), run_dir / "mount.log")
    folders = mirror_folders(conn)
    for member, dest in links.items():
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(point / mount_path(member, folders), dest)


def release(run_dir: Path) -> None:
    """Unmount the run's mount, if it made one."""
    from cloudvault.mount.session import mounted, unmount

    point = run_dir / MOUNT_FOLDER
    if point.is_dir() and mounted(point):
        unmount(point)
