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
    from cloudvault.catalog.details import list_entry
    from cloudvault.catalog.query import resolve_entry
    from cloudvault.cli.ui import UI, human_size

    mirror_id, entry_id, _ = resolve_entry(conn, args.entry)
    hits = list_entry(conn, mirror_id, entry_id, args.pattern)
    ui = UI(as_json=args.json)
    if args.json:
        ui.emit({"entry": entry_id, "pattern": args.pattern, "results": [h.to_json() for h in hits]})
    for h in hits:
        digest = (h.blake3 or "-")[:16]
        where = f"  in {h.archive}" if h.archive else ""
        ui.line(f"{h.kind:<7} {human_size(h.size):>10}  {digest:<16}  {h.path}{where}")
    if not hits and not args.json:
        what = f"matches {args.pattern!r}; `vault ls {args.entry}` lists everything" if args.pattern else "is indexed"
        ui.warn(f"nothing in {entry_id} {what}")
    return errors.OK if hits else errors.NOTHING_FOUND
