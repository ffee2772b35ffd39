"""`vault info` on a terminal: the catalog, what named it, its schema, each mirror's counts, what it records."""

from __future__ import annotations

# what named the catalog -> how `vault info` says it
CHOSEN_BY = {
    "--catalog": "given by --catalog",
    "$VAULT_CATALOG": "given by $VAULT_CATALOG",
    "default": "your own catalog (the default)",
    "demo": "the demo's catalog: the default until `vault index` builds your own",
}


def show(ui, info) -> None:
    ui.line(f"catalog  {info.path}")
    ui.line(f"         {CHOSEN_BY[info.named_by]}")
    summary = info.summary
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
