"""Find experiments, docs, files and archive members by keyword: `vault search granite`.

Every term must match (case-insensitive substrings). Cautions and flag counts of the entries hit are shown.
Exit 0 with hits, 1 with none.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.catalog.query import KINDS
from cloudvault.cli.common import add_output_options, catalog_name, opened_catalog

HEADINGS = {"entry": "entries", "doc": "docs", "file": "files", "member": "archive members", "restore": "restores",
            "run": "runs"}


def add_arguments(parser) -> None:
    parser.add_argument(
        "terms", nargs="+", metavar="TERM", type=catalog_name, help="search terms; every one must match"
    )
    parser.add_argument("--entry", type=catalog_name, help="only this entry (ID or unique prefix)")
    parser.add_argument("--kind", action="append", default=[], choices=KINDS, help="only this kind; repeatable")
    parser.add_argument("--limit", type=int, default=20, help="at most this many results per kind; 0 for all")
    add_output_options(parser)


def run(args) -> int:
    from cloudvault.catalog.query import resolve_entry, search
    from cloudvault.cli.ui import UI

    if args.limit < 0:
        raise errors.UsageError(detail="--limit must be 0 (no limit) or more")
    limit = 0 if args.limit >= 1 << 63 else args.limit  # more than SQLite can count: no limit
    terms = [t for t in args.terms if t.strip()]
    if not terms:
        raise errors.UsageError(detail="give a search term")
    with opened_catalog(args, readonly=True) as conn:
        scope = resolve_entry(conn, args.entry)[:2] if args.entry else None
        result = search(conn, terms, scope=scope, kinds=tuple(args.kind) or KINDS, limit=limit)
    ui = UI(as_json=args.json)
    if args.json:
        ui.emit(result.to_json())
    else:
        _print(ui, result, args.catalog)
    return errors.OK if result.found else errors.NOTHING_FOUND


def _print(ui, result, catalog: str | None) -> None:
    from cloudvault.cli.ui import human_size

    if not result.found:
        from cloudvault import config

        path, origin = config.catalog_origin(catalog)
        ui.line(f"nothing matches {' '.join(result.query)!r} in {path} ({config.NAMED_BY[origin]}; "
                "`vault info` says what it holds)")  # fmt: skip
        return
    for kind, hits in result.hits.items():
        if not hits:
            continue
        total = result.totals[kind]
        ui.heading(f"{HEADINGS[kind]} ({len(hits)} of {total})" if total > len(hits) else f"{HEADINGS[kind]} ({total})")
        for h in hits:
            if kind == "entry":
                ui.line(f"  {h.entry:<40} {h.text}")
            elif kind == "doc":
                ui.line(f"  {h.path}")
                ui.line(f"      {' '.join(h.text.split())}")
            elif kind == "file":
                ui.line(f"  {_in_entry(h.entry, h.path)}  {human_size(h.size)}")
            elif kind == "member":
                ui.line(f"  {h.path}  {human_size(h.size)}  in {_in_entry(h.entry, h.archive)}")
            else:
                ui.line(f"  {h.entry or '-'}  {h.path}  {h.text}")
    if result.cautions:
        ui.heading("cautions")
        for entry, notes in result.cautions.items():
            ui.line(f"  ! {entry}: {'; '.join(notes)}")


def _in_entry(entry: str | None, path: str) -> str:
    """A mirror path, with its entry named in front only where the path does not already start with it."""
    return path if not entry or path == entry or path.startswith(f"{entry}/") else f"{entry}: {path}"
