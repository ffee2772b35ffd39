"""Write seekable copies of single-frame archives (4 MiB frames) into a cache beside the catalog.

The mirror is never touched. Extraction then reads only the frames that cover a member, verified against the
same BLAKE3, and falls back to the original archive if a copy is gone.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, catalog_name, opened_catalog


def gib(text: str) -> float:
    """A size in GiB: 0 up to 2**30 GiB (an exbibyte; beyond it the byte count would overflow)."""
    import math

    value = float(text)
    if not math.isfinite(value) or not 0 <= value <= 2**30:
        raise ValueError(text)
    return value


gib.__name__ = "size in GiB"


def add_arguments(parser) -> None:
    parser.add_argument("entry", nargs="?", type=catalog_name, help="entry ID or prefix; none: every entry")
    parser.add_argument("--to", help="cache folder (default: beside the catalog)")
    parser.add_argument("--max-gb", type=gib, help="most cache space to use, in GiB")
    parser.add_argument("--status", action="store_true", help="show the copies and the space they use")
    add_output_options(parser)


def run(args) -> int:
    from pathlib import Path

    from cloudvault import config
    from cloudvault.catalog.db import refuse_non_catalog, writer_lock
    from cloudvault.catalog.query import resolve_entry
    from cloudvault.cli.ui import UI
    from cloudvault.optimize import optimize

    where, origin = config.catalog_origin(args.catalog)
    path = Path(where)
    refuse_non_catalog(path, config.NAMED_BY[origin])  # before the lock: a wrong --catalog gets nothing beside it
    if not path.exists():
        raise errors.CatalogMissing(path=path)
    cache = Path(args.to) if args.to else config.cache_dir(path)
    ui = UI(as_json=args.json)
    with writer_lock(path), opened_catalog(path=path, readonly=False, origin=origin) as conn:
        if args.status:
            return _status(ui, conn, cache)
        scope = resolve_entry(conn, args.entry)[:2] if args.entry else None
        max_bytes = int(args.max_gb * 2**30) if args.max_gb is not None else None
        report = optimize(conn, cache, scope, max_bytes, on_archive=lambda p: ui.warn(f"writing seekable copy of {p}"))
    if args.json:
        ui.emit(report.to_json())
    else:
        from cloudvault.cli.ui import human_size

        for w in report.written:
            ui.line(f"{w['archive']} -> {w['copy']} ({human_size(w['bytes'])}, {w['frames']} frames)")
        for s in report.skipped:
            ui.line(f"skipped {s['archive']}: {s['why']}")
        if not report.written and not report.skipped:
            ui.line(f"nothing written: {_why_none(report)}")
        if report.written or cache.exists():  # never a figure for a folder that was not made
            ui.line(f"{len(report.written)} copies written; {human_size(report.bytes_used)} used in {cache}")
    return errors.OK


def _why_none(report) -> str:
    """One line on why optimize had nothing to copy (and so created no cache folder)."""
    from cloudvault.archive.seekable import FRAME_RAW
    from cloudvault.cli.ui import human_size

    reasons = []
    if report.multi_frame:
        reasons.append(f"{report.multi_frame} archive(s) already multi-frame (seekable)")
    if report.small:
        reasons.append(f"{report.small} archive(s) with no frame over {human_size(2 * FRAME_RAW)} (read whole)")
    if not reasons:
        return "no archive in scope lacks a seekable copy"
    return "; ".join(reasons) + ": no copy needed"


def _status(ui, conn, cache) -> int:
    from cloudvault.catalog.copies import copy_bytes_used, copy_status
    from cloudvault.cli.ui import human_size

    rows = copy_status(conn)
    if ui.as_json:
        ui.emit({"cache": str(cache), "bytes_used": copy_bytes_used(conn), "copies": rows})
    for r in rows:
        ui.line(f"{r['archive']}: {human_size(r['archive_bytes'])} -> copy {human_size(r['copy_bytes'])}, "
                f"{r['frames']} frames{'' if r['present'] else ' (MISSING)'}")  # fmt: skip
    ui.line(f"{len(rows)} seekable copies, {human_size(copy_bytes_used(conn))} used in {cache}")
    return errors.OK
