"""Where the catalog and its caches live (--catalog, then $VAULT_CATALOG, then the XDG data dir), and the per-user
state (the registry of every mirror any catalog indexed) in the XDG state dir."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pathlib is imported where a Path is made: `vault extract` and `vault search` never need one
    from pathlib import Path

CATALOG_ENV = "VAULT_CATALOG"


def _data_home() -> str:
    return os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")


def data_home() -> Path:
    from pathlib import Path

    return Path(_data_home())


def state_dir() -> str:
    """vault's per-user state: $XDG_STATE_HOME/cloudvault, default ~/.local/state/cloudvault."""
    home = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(home, "cloudvault")


def mirror_registry_path() -> str:
    """The registry of every mirror root any catalog of this user has indexed (the mirror guard reads it)."""
    return os.path.join(state_dir(), "mirrors.tsv")


def demo_catalog_path() -> str:
    """Where `vault demo` (without --dir) keeps its catalog."""
    return os.path.join(_data_home(), "cloudvault", "demo", "catalog.db")


# what named the catalog (catalog_origin) -> how a message names it to the user
NAMED_BY = {"--catalog": "--catalog", "$VAULT_CATALOG": "$VAULT_CATALOG", "default": "your catalog",
            "demo": "the demo's catalog"}  # fmt: skip


def catalog_origin(explicit: str | os.PathLike | None = None, writing: bool = False) -> tuple[str, str]:
    """(the catalog file to use, what named it: '--catalog', '$VAULT_CATALOG', 'default' or 'demo'): the explicit
    option, else $VAULT_CATALOG, else the XDG data dir. The path is a str, as typed but for a trailing slash
    (`Path(...)` it where a Path is wanted). Until the user has a catalog of their own there, the demo's catalog
    is the default (so the README's tour works after `vault demo`); `vault index` (writing) always builds the
    user's own."""
    given = explicit or os.environ.get(CATALOG_ENV)
    if not given:
        own = os.path.join(_data_home(), "cloudvault", "catalog.db")
        if not writing and not os.path.exists(own) and os.path.exists(demo_catalog_path()):
            return demo_catalog_path(), "demo"
        return own, "default"
    path = os.path.expanduser(given)
    return path.rstrip("/") or path, "--catalog" if explicit else "$VAULT_CATALOG"


def catalog_path(explicit: str | os.PathLike | None = None, writing: bool = False) -> str:
    """The catalog file to use (catalog_origin's path)."""
    return catalog_origin(explicit, writing)[0]


def cache_dir(catalog: str | os.PathLike) -> Path:
    """Seekable copies and other derived data sit beside the catalog, never in the mirror."""
    from pathlib import Path

    catalog = Path(catalog)
    return catalog.with_name(catalog.name + ".cache")


def seekable_dir(cache: Path) -> Path:
    """The folder of seekable copies inside a cache."""
    return cache / "seekable"


def seekable_copy_path(cache: Path, archive_blake3: str) -> Path:
    """Where vault optimize keeps the seekable copy of an archive: named by the archive's BLAKE3."""
    return seekable_dir(cache) / f"{archive_blake3}.tar.zst"
