"""Show what changed between two index generations, files and archive members, as `restic diff` does.

Added (+), removed (-), modified (M), changed in place (C: same size and mtime, other bytes, the recorded hash
kept) and damaged (D: an archive intact when recorded, damaged since; its recorded members kept).

With no generation, the last two are compared; with one, it and the latest. `vault log` lists the generations.
A member is named as ARCHIVE/MEMBER. Exit 0 (whether or not anything changed), 3 for a generation that is not there.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, with_catalog


def add_arguments(parser) -> None:
    parser.add_argument("first", nargs="?", type=int, metavar="GEN_A", help="the earlier generation")
    parser.add_argument("second", nargs="?", type=int, metavar="GEN_B", help="the later one (default: the latest)")
    add_output_options(parser)


@with_catalog(readonly=True)
def run(args, conn) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import diff as view
    from cloudvault.diff import diff_generations

    diff = diff_generations(conn, args.first, args.second)
    ui = UI(as_json=args.json)
    ui.present(diff, view.show)
    return errors.OK
