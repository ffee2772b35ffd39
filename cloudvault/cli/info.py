"""Which catalog vault is using and what it holds: `vault info`.

Names the catalog that answers every command and what chose it: --catalog, $VAULT_CATALOG, your own (the XDG
data dir), or the demo's (the default until `vault index` has built your own). Then its mirrors (root, last
index, entries, files, archives, members, flags), the restores and runs it records, and its schema version.
Exit 0; 3 when there is no catalog there yet (it says where `vault index` would build it).
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, opened_catalog

# what named the catalog -> how `vault info` says it
CHOSEN_BY = {
    "--catalog": "given by --catalog",
    "$VAULT_CATALOG": "given by $VAULT_CATALOG",
    "default": "your own catalog (the default)",
    "demo": "the demo's catalog: the default until `vault index` builds your own",
}


def add_arguments(parser) -> None:
    add_output_options(parser)


def run(args) -> int:
    from cloudvault import config
    from cloudvault.catalog.summary import catalog_summary
    from cloudvault.cli.ui import UI

    path, origin = config.catalog_origin(args.catalog)
    ui = UI(as_json=args.json)
    with opened_catalog(args, readonly=True, optional=True) as conn:
        summary = catalog_summary(conn) if conn is not None else None
    catalog = {"path": path, "named_by": origin, "exists": summary is not None}
    if args.json:
        ui.emit({"catalog": catalog, **(summary.to_json() if summary else {"mirrors": []})})
    else:
        _show(ui, path, origin, summary)
    return errors.OK if summary else errors.NOT_FOUND


def _show(ui, path: str, origin: str, summary) -> None:
    ui.line(f"catalog  {path}")
    ui.line(f"         {CHOSEN_BY[origin]}")
    if summary is None:
        ui.line("         none there yet: `vault index MIRROR` builds it (or `vault demo` builds the demo's)")
        return
    built = f", written by vault {summary.tool_version}" if summary.tool_version else ""
    ui.line(f"         schema version {summary.schema_version}{built}; last index {summary.last_index or 'never'}")
    for m in summary.mirrors:
        ui.heading(f"mirror {m.name}: {m.root}")
        counts = ", ".join(_counted(n, word) for n, word in ((m.entries, "entry"), (m.files, "file"),
                           (m.archives, "archive"), (m.members, "member"), (m.flags, "flag")))  # fmt: skip
        ui.line(f"  indexed {m.indexed_at or 'never'}: {counts}")
    ui.line(f"recorded: {_counted(summary.restores, 'restore')}, {_counted(summary.runs, 'run')}; "
            f"{_counted(summary.seekable_copies, 'seekable copy')}")  # fmt: skip


def _counted(n: int, word: str) -> str:
    """'1 entry', '2 entries', '0 runs'."""
    if n == 1:
        return f"1 {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"
