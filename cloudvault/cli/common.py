"""What the commands share: the catalog a command opens, closed when it ends, however it ends (borg's with_repository).

Imported by every command module at start-up: it imports the catalog layer only when a command runs.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def opened_catalog(args, *, readonly: bool, create: bool = False) -> Iterator:
    """The catalog --catalog (or $VAULT_CATALOG, or the XDG default) names, closed when the block ends."""
    from cloudvault import config
    from cloudvault.catalog.db import open_catalog

    conn = open_catalog(config.catalog_path(args.catalog), readonly=readonly, create=create)
    try:
        yield conn
    finally:
        conn.close()


def with_catalog(*, readonly: bool | Callable[[object], bool], create: bool = False) -> Callable:
    """A command's run(args, conn), given the catalog opened (readonly: a bool, or a function of args) and
    closed after it: `@with_catalog(readonly=True)` over `def run(args, conn) -> int`."""

    def decorate(run: Callable[..., int]) -> Callable[[object], int]:
        @functools.wraps(run)
        def run_with_catalog(args) -> int:
            read_only = readonly(args) if callable(readonly) else readonly
            with opened_catalog(args, readonly=read_only, create=create) as conn:
                return run(args, conn)

        return run_with_catalog

    return decorate
