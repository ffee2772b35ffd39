"""`vault show` on a terminal: the entry's rows, its cautions and flags, what vault did with it, its settings and
ENVIRONMENT.md."""

from __future__ import annotations

import json

from cloudvault.cli.ui import human_size
from cloudvault.cli.views.extract import note_one_xz_block


def show(ui, d) -> None:
    """The heading, the manifest's and the index's rows, cautions and flags, records, settings."""
    ui.heading(d.entry)
    rows = [
        ("what", d.what),
        ("node/GPU", d.node_gpu),
        ("measured", d.measured),
        ("size", f"{d.size_text} (recorded); {human_size(d.bytes_on_disk)} in {d.files} files on disk"),
        ("archives", _archives(d) if d.archives else ""),
        ("key files", "; ".join(d.key_files)),
        ("mirror", d.mirror),
    ]
    for label, value in rows:
        if value:
            ui.line(f"  {label:<10} {value}")
    for path, raw_size in d.one_block_xz.items():
        note_one_xz_block(path, raw_size)
    if not d.present:
        ui.line("  (listed in the manifest but not found in this mirror)")
    _cautions(ui, d)
    _records(ui, d)
    _settings(ui, d)


def _archives(d) -> str:
    """How many archives, of which formats (as the index recorded them, most first), holding how many members."""
    formats = ", ".join(f".{fmt} x{n}" for fmt, n in d.archive_formats.items())
    return f"{d.archives} archive{'s' * (d.archives > 1)} ({formats}) holding {d.members} members"


def _cautions(ui, d) -> None:
    if d.caution:
        ui.line(f"  ! caution  {d.caution}")
    for flag in d.flags:
        where = flag.path or ""
        if flag.member:
            where += f" :: {flag.member}"
        ui.line(f"  ! {flag.kind:<9} {where} {flag.detail}".rstrip())


def _records(ui, d) -> None:
    """What vault did with this entry: restores and reproduction runs."""
    for r in d.restores:
        if r.target:
            ui.line(f"  restored {r.kind} {r.name} -> {r.target}: {r.status} at {r.finished_at}")
        else:  # failed before anything was placed: the error says why
            why = r.detail.get("error", "") if isinstance(r.detail, dict) else ""
            ui.line(f"  restore  {r.kind} {r.name}: {r.status} ({why}) at {r.finished_at}")
    for r in d.runs:
        ui.line(f"  run      {r.run_id} ({r.executor}): {r.status} {r.verdict or ''}".rstrip())


def _settings(ui, d) -> None:
    if d.settings:
        ui.heading("settings")
        for key, value in d.settings.items():
            text = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else str(value)
            ui.line(f"  {key:<16} {text}")
    if d.environment:
        ui.heading("ENVIRONMENT.md")
        for line in d.environment.splitlines()[:30]:
            ui.line(f"  {line}")
