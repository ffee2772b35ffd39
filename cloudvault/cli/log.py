"""List the index generations: every `vault index` run, numbered and kept, with what it counted.

Each generation shows when it ran, the mirrors it indexed, and its counts: files seen and read, added, modified,
removed, changed in place (same size and mtime, other bytes: the recorded hash kept) and newly damaged archives
(their recorded members kept). Generation 0 is what a catalog held before generations were kept. `vault diff`
shows what changed between two of them.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, with_catalog


def add_arguments(parser) -> None:
    add_output_options(parser)


@with_catalog(readonly=True)
def run(args, conn) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import log as view
    from cloudvault.diff import index_log

    log = index_log(conn)
    ui = UI(as_json=args.json)
    ui.present(log, view.show)
    return errors.OK if log.generations else errors.NOTHING_FOUND
