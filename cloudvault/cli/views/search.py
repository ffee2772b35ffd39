"""`vault search` on a terminal: hits under a heading per kind, the cautions of the entries hit; or one line per
flag (`--flagged`)."""

from __future__ import annotations

from cloudvault.cli.ui import human_size

HEADINGS = {"entry": "entries", "doc": "docs", "file": "files", "member": "archive members", "restore": "restores",
            "run": "runs"}


def show(ui, result, catalog: str | None) -> None:
    """The hits, or what was searched when nothing matched; then what the search read."""
    _hits(ui, result, catalog)
    ui.line(f"searched names, and the text of {result.documents} documents; `vault grep` searches inside files")


def _hits(ui, result, catalog: str | None) -> None:
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
            _hit(ui, kind, h)
    if result.cautions:
        ui.heading("cautions")
        for entry, notes in result.cautions.items():
            ui.line(f"  ! {entry}: {'; '.join(notes)}")


def _hit(ui, kind: str, h) -> None:
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


def show_flags(ui, found) -> None:
    """Each flag on one line: entry:path[::member]  kind: detail."""
    for flag in found.flags:
        path = _in_entry(flag.entry, flag.path or "").removeprefix(f"{flag.entry}/")
        where = f"{flag.entry}:{path}" if flag.entry else path
        where = f"{where}::{flag.member}" if flag.member else where
        ui.line(f"{where}  {flag.kind}: {flag.detail}")


def _in_entry(entry: str | None, path: str) -> str:
    """A mirror path, with its entry named in front only where the path does not already start with it."""
    return path if not entry or path == entry or path.startswith(f"{entry}/") else f"{entry}: {path}"
