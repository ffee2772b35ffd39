"""Find experiments, docs, files and archive members by keyword: `vault search granite`.

Every term must match (case-insensitive substrings). Cautions and flag counts of the entries hit are shown.
Exit 0 with hits, 1 with none.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.catalog.query import KINDS
from cloudvault.cli.common import add_output_options, catalog_name, opened_catalog


def add_arguments(parser) -> None:
    parser.add_argument("terms", nargs="*", metavar="TERM", type=catalog_name,
                        help="search terms; every one must match")  # fmt: skip
    parser.add_argument("--flagged", nargs="?", const="", metavar="KIND",
                        help="list what the index flagged (secret, damage ...) across the mirror, instead")  # fmt: skip
    parser.add_argument("--entry", type=catalog_name, help="only this entry (ID or unique prefix)")
    parser.add_argument("--kind", action="append", default=[], choices=KINDS, help="only this kind; repeatable")
    parser.add_argument("--limit", type=int, default=20, help="at most this many results per kind; 0 for all")
    add_output_options(parser)


def run(args) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import search as view
    from cloudvault.search import SearchRequest, flags, search_catalog

    if args.limit < 0:
        raise errors.UsageError(detail="--limit must be 0 (no limit) or more")
    limit = 0 if args.limit >= 1 << 63 else args.limit  # more than SQLite can count: no limit
    terms = [t for t in args.terms if t.strip()]
    if args.flagged is None and not terms:
        raise errors.UsageError(detail="give a search term")
    ui = UI(as_json=args.json)
    with opened_catalog(args, readonly=True) as conn:
        if args.flagged is not None:
            result = flags(conn, args.flagged or None)
        else:
            result = search_catalog(conn, SearchRequest(terms, args.entry, args.kind, limit))
    if args.flagged is not None:
        ui.present(result, view.show_flags)
    else:
        ui.present(result, view.show, args.catalog)
    found = result.flags if args.flagged is not None else result.found
    return errors.OK if found else errors.NOTHING_FOUND
