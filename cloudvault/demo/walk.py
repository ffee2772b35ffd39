"""`vault demo` as one operation: build the demo mirror into a catalog of its own, then walk the users' journeys
through it (each walked by the command line's walk(), which runs it as the user would type it); a frozen result."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cloudvault import errors
from cloudvault.documents import Document

MIRROR = "<mirror>"  # in a journey's argv: the root of the mirror just built


@dataclass(frozen=True)
class DemoOptions:
    """Where the demo is built, its catalog, and the journeys it walks (written in cli/demo.py: the grammar's own)."""

    dest: Path
    catalog: Path
    journeys: Callable[[], tuple[tuple[str, ...], ...]]  # asked once the mirror is built


@dataclass(frozen=True)
class DemoBuilt(Document):
    """The demo mirror, built: its root and how long that took."""

    mirror: str
    seconds: float


@dataclass(frozen=True)
class JourneyWalked(Document):
    """One journey: the argv walked, its exit code and (with --json) its own JSON document."""

    argv: tuple[str, ...]
    exit_code: int
    output: object = None


@dataclass(frozen=True)
class DemoWalked(Document):
    """`vault demo`: the mirror built, the catalog it was indexed into, and every journey walked in order."""

    mirror: str
    catalog: str
    journeys: tuple[JourneyWalked, ...]

    @property
    def exit_code(self) -> int:
        """The index's: 5 if the demo's damage flags were not all expected (a journey that fails is only said)."""
        return self.journeys[0].exit_code


def walk_demo(options: DemoOptions, walk: Callable[[list[str]], JourneyWalked],
              built: Callable[[DemoBuilt], None] = lambda built: None) -> DemoWalked:  # fmt: skip
    """Build the demo (its catalog claimed first: never the user's real one), hand built() the mirror, then each
    journey to walk() in order."""
    from cloudvault.demo.build import build_demo

    errors.require_tool("zstd", "zstd", "to build the demo's archives as the lab made them")
    errors.require_tool("pzstd", "zstd", "to build the demo's multi-frame archives")
    claim_catalog(options.catalog)
    started = time.monotonic()
    root = build_demo(options.dest)
    built(DemoBuilt(str(root), time.monotonic() - started))
    journeys = [[str(root) if a == MIRROR else a for a in argv] for argv in options.journeys()]
    return DemoWalked(str(root), str(options.catalog), tuple(walk(argv) for argv in journeys))


def claim_catalog(db: Path) -> None:
    """The demo writes only into a catalog it created: never into the user's real one."""
    from cloudvault.catalog.db import meta_value, open_catalog, set_meta_value

    if db.exists():
        conn = open_catalog(db, readonly=True)
        try:
            ours = meta_value(conn, "demo") == "1"
        finally:
            conn.close()
        if not ours:
            raise errors.UsageError(detail=f"{db} is a catalog that `vault demo` did not create; refusing to write "
                                    "the demo into it (leave out --catalog, or name a new file)")  # fmt: skip
        return
    conn = open_catalog(db, create=True)
    try:
        set_meta_value(conn, "demo", "1")
    finally:
        conn.close()
