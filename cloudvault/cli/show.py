"""`vault show` and `vault ls`: one entry's metadata, and its files and archive members."""

from __future__ import annotations

import json

from cloudvault import config, errors
from cloudvault.catalog.browse import EntryDetails, entry_details, list_entry
from cloudvault.catalog.db import open_catalog
from cloudvault.catalog.query import resolve_entry
from cloudvault.cli.ui import UI, human_size


def run_show(catalog: str | None, entry: str, as_json: bool) -> int:
    conn = open_catalog(config.catalog_path(catalog), readonly=True)
    details = entry_details(conn, *resolve_entry(conn, entry)[:2])
    ui = UI(as_json=as_json)
    if as_json:
        ui.emit(details.to_json())
    else:
        _print_details(ui, details)
    return errors.OK


def _print_details(ui: UI, d: EntryDetails) -> None:
    ui.heading(d.entry)
    rows = [
        ("what", d.what),
        ("node/GPU", d.node_gpu),
        ("measured", d.measured),
        ("size", f"{d.size_text} (recorded); {human_size(d.bytes_on_disk)} in {d.files} files on disk"),
        ("archives", f"{d.archives} .tar.zst holding {d.members} members" if d.archives else ""),
        ("key files", "; ".join(d.key_files)),
        ("mirror", d.mirror),
    ]
    for label, value in rows:
        if value:
            ui.line(f"  {label:<10} {value}")
    if not d.present:
        ui.line("  (listed in the manifest but not found in this mirror)")
    if d.caution:
        ui.line(f"  ! caution  {d.caution}")
    for flag in d.flags:
        where = flag["path"] or ""
        if flag["member"]:
            where += f" :: {flag['member']}"
        ui.line(f"  ! {flag['kind']:<9} {where} {flag['detail']}".rstrip())
    if d.settings:
        ui.heading("settings")
        for key, value in d.settings.items():
            text = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else str(value)
            ui.line(f"  {key:<16} {text}")
    if d.environment:
        ui.heading("ENVIRONMENT.md")
        for line in d.environment.splitlines()[:30]:
            ui.line(f"  {line}")


def run_ls(catalog: str | None, entry: str, pattern: str | None, as_json: bool) -> int:
    conn = open_catalog(config.catalog_path(catalog), readonly=True)
    mirror_id, entry_id, _ = resolve_entry(conn, entry)
    hits = list_entry(conn, mirror_id, entry_id, pattern)
    ui = UI(as_json=as_json)
    if as_json:
        ui.emit({"entry": entry_id, "pattern": pattern, "results": [h.to_json() for h in hits]})
    for h in hits:
        digest = (h.blake3 or "-")[:16]
        where = f"  in {h.archive}" if h.archive else ""
        ui.line(f"{h.kind:<7} {human_size(h.size):>10}  {digest:<16}  {h.path}{where}")
    return errors.OK if hits else errors.NOTHING_FOUND
