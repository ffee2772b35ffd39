"""Where the catalog and its caches live: --catalog, then $VAULT_CATALOG, then the XDG data dir."""

from __future__ import annotations

import os
from pathlib import Path

CATALOG_ENV = "VAULT_CATALOG"


def data_home() -> Path:
    xdg = os.environ.get("XDG_DATA_HOME")
    return Path(xdg) if xdg else Path.home() / ".local" / "share"


def catalog_path(explicit: str | os.PathLike | None = None) -> Path:
    """The catalog file to use: the explicit option, else $VAULT_CATALOG, else the XDG data dir."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get(CATALOG_ENV)
    if env:
        return Path(env).expanduser()
    return data_home() / "cloudvault" / "catalog.db"


def cache_dir(catalog: Path) -> Path:
    """Seekable copies and other derived data sit beside the catalog, never in the mirror."""
    return catalog.with_name(catalog.name + ".cache")


def seekable_dir(cache: Path) -> Path:
    """The folder of seekable copies inside a cache."""
    return cache / "seekable"


def seekable_copy_path(cache: Path, archive_blake3: str) -> Path:
    """Where vault optimize keeps the seekable copy of an archive: named by the archive's BLAKE3."""
    return seekable_dir(cache) / f"{archive_blake3}.tar.zst"

