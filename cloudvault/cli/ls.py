"""Files and archive members of an entry, with size, BLAKE3 and archive: `vault ls 018 'dumps/*.json'`.

Exit 0 when something is listed, 1 when nothing matches.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, catalog_name, with_catalog


def add_arguments(parser) -> None:
    parser.add_argument("entry", type=catalog_name, help="entry ID or unique prefix")
    parser.add_argument("pattern", nargs="?", type=catalog_name, help="glob over paths, e.g. 'dumps/*.json'")
    add_output_options(parser)


@with_catalog(readonly=True)
def run(args, conn) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import ls as view
    from cloudvault.listing import list_files

    listing = list_files(conn, args.entry, args.pattern)
    ui = UI(as_json=args.json)
    ui.present(listing, view.show, args.entry)
    return errors.OK if listing.hits else errors.NOTHING_FOUND
