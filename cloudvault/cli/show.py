"""One entry's metadata: what, node/GPU, dates, size, key files, cautions, settings, flags: `vault show 014`."""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, catalog_name, with_catalog


def add_arguments(parser) -> None:
    parser.add_argument("entry", type=catalog_name, help="entry ID or unique prefix, e.g. 014")
    add_output_options(parser)


@with_catalog(readonly=True)
def run(args, conn) -> int:
    from cloudvault.catalog.details import entry_details
    from cloudvault.catalog.query import resolve_entry
    from cloudvault.cli.ui import UI

    details = entry_details(conn, *resolve_entry(conn, args.entry)[:2])
    ui = UI(as_json=args.json)
    if args.json:
        ui.emit(details.to_json())
    else:
        _print_details(ui, details)
    return errors.OK


def _print_details(ui, d) -> None:
    from cloudvault.cli.ui import human_size

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
    _print_cautions(ui, d)
    _print_records(ui, d)
    _print_settings(ui, d)


def _print_cautions(ui, d) -> None:
    if d.caution:
        ui.line(f"  ! caution  {d.caution}")
    for flag in d.flags:
        where = flag["path"] or ""
        if flag["member"]:
            where += f" :: {flag['member']}"
        ui.line(f"  ! {flag['kind']:<9} {where} {flag['detail']}".rstrip())


def _print_records(ui, d) -> None:
    """What vault did with this entry: restores and reproduction runs."""
    for r in d.restores:
        if r["target"]:
            ui.line(f"  restored {r['kind']} {r['name']} -> {r['target']}: {r['status']} at {r['finished_at']}")
        else:  # failed before anything was placed: the error says why
            why = r["detail"].get("error", "") if isinstance(r["detail"], dict) else ""
            ui.line(f"  restore  {r['kind']} {r['name']}: {r['status']} ({why}) at {r['finished_at']}")
    for r in d.runs:
        ui.line(f"  run      {r['run_id']} ({r['executor']}): {r['status']} {r['verdict'] or ''}".rstrip())


def _print_settings(ui, d) -> None:
    import json

    if d.settings:
        ui.heading("settings")
        for key, value in d.settings.items():
            text = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else str(value)
            ui.line(f"  {key:<16} {text}")
    if d.environment:
        ui.heading("ENVIRONMENT.md")
        for line in d.environment.splitlines()[:30]:
            ui.line(f"  {line}")
