"""`vault search`: entries, docs, files and archive members matching every term, cautions shown."""

from __future__ import annotations

import argparse

from cloudvault import config, errors
from cloudvault.catalog.db import open_catalog
from cloudvault.catalog.query import KINDS, SearchResult, resolve_entry, search
from cloudvault.cli.fast import QuietParser
from cloudvault.cli.ui import UI, human_size

HEADINGS = {"entry": "entries", "doc": "docs", "file": "files", "member": "archive members"}


def run_search(
    catalog: str | None, terms: list[str], entry: str | None, kinds: list[str], limit: int, as_json: bool
) -> int:
    """Print the results; exit 0 with hits, 1 with none."""
    bad = [k for k in kinds if k not in KINDS]
    if bad or not terms or limit < 0:
        detail = f"unknown --kind {bad[0]!r} (one of {', '.join(KINDS)})" if bad else "give a search term"
        raise errors.UsageError(detail=detail if bad or not terms else "--limit must be 0 (no limit) or more")
    conn = open_catalog(config.catalog_path(catalog), readonly=True)
    scope = resolve_entry(conn, entry)[:2] if entry else None
    result = search(conn, terms, scope=scope, kinds=tuple(kinds) or KINDS, limit=limit)
    ui = UI(as_json=as_json)
    if as_json:
        ui.emit(result.to_json())
    else:
        _print(ui, result)
    return errors.OK if result.found else errors.NOTHING_FOUND


def _print(ui: UI, result: SearchResult) -> None:
    if not result.found:
        ui.line(f"nothing matches {' '.join(result.query)!r}")
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
                ui.line(f"  {h.entry or '-':<12.12} {h.path}  {human_size(h.size)}")
            else:
                ui.line(f"  {h.entry or '-':<12.12} {h.path}  {human_size(h.size)}  in {h.archive}")
    if result.cautions:
        ui.heading("cautions")
        for entry, notes in result.cautions.items():
            ui.line(f"  ! {entry}: {'; '.join(notes)}")


def build_parser() -> argparse.ArgumentParser:
    parser = QuietParser(prog="vault search", add_help=False)
    parser.add_argument("terms", nargs="*")
    parser.add_argument("--entry")
    parser.add_argument("--kind", action="append", default=[])
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    return parser


def fast_runner(catalog: str | None, ns: argparse.Namespace):
    return lambda: run_search(catalog, ns.terms, ns.entry, ns.kind, ns.limit, ns.json)
