"""`vault extract`: one member, a glob or a directory out of an entry's archives, or a plain file, verified."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cloudvault import config, errors
from cloudvault.catalog.db import open_catalog
from cloudvault.catalog.query import resolve_entry
from cloudvault.cli.fast import QuietParser
from cloudvault.cli.ui import UI, human_size
from cloudvault.extract import extract, find_targets

PROGRESS_OVER = 8 << 20  # a bar only when there is something to wait for


def run_extract(
    catalog: str | None, entry: str, path: str, output: str | None, archive: str | None, keep_path: bool,
    force: bool, allow_outside_links: bool, as_json: bool,
) -> int:  # fmt: skip
    conn = open_catalog(config.catalog_path(catalog), readonly=True)
    mirror_id, entry_id, _ = resolve_entry(conn, entry)
    targets = find_targets(conn, mirror_id, entry_id, path, archive)
    dest = None if output == "-" else Path(output or ".")
    ui = UI(as_json=as_json and dest is not None)
    total = sum(t.size for t in targets)
    progress = ui.progress("extracting") if total > PROGRESS_OVER else None
    if progress:
        progress.start(total, len(targets))
    report = extract(conn, mirror_id, entry_id, targets, dest, keep_path=keep_path, force=force,
                     allow_outside_links=allow_outside_links, progress=progress)  # fmt: skip
    if ui.as_json:
        ui.emit(report.to_json())
    elif dest is not None:
        for w in report.written:
            ui.line(f"{w.dest}  {human_size(w.size)}  blake3 {(w.blake3 or '-')[:16]} ok")
        ui.line(f"{len(report.written)} written, {human_size(report.bytes_decompressed)} decompressed")
    else:
        sys.stderr.write(f"vault: {len(report.written)} member(s) written to stdout, verified\n")
    return errors.OK


def build_parser() -> argparse.ArgumentParser:
    parser = QuietParser(prog="vault extract", add_help=False)
    parser.add_argument("entry")
    parser.add_argument("path")
    parser.add_argument("-o", "--output")
    parser.add_argument("--archive")
    parser.add_argument("--keep-path", action="store_true")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--allow-outside-links", action="store_true")
    parser.add_argument("--json", action="store_true")
    return parser


def fast_runner(catalog: str | None, ns: argparse.Namespace):
    return lambda: run_extract(catalog, ns.entry, ns.path, ns.output, ns.archive, ns.keep_path, ns.force,
                               ns.allow_outside_links, ns.json)  # fmt: skip
