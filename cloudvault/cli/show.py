"""One entry's metadata: what, node/GPU, dates, size, key files, cautions, settings, flags: `vault show 014`."""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, catalog_name, with_catalog


def add_arguments(parser) -> None:
    parser.add_argument("entry", type=catalog_name, help="entry ID or unique prefix, e.g. 014")
    add_output_options(parser)


@with_catalog(readonly=True)
def run(args, conn) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import show as view
    from cloudvault.listing import describe_entry

    details = describe_entry(conn, args.entry)
    ui = UI(as_json=args.json)
    ui.present(details, view.show)
    return errors.OK
