"""`vault verify` and `vault optimize`: re-hash what the catalog recorded; make seekable copies."""

from __future__ import annotations

from pathlib import Path

from cloudvault import config, errors
from cloudvault.catalog.db import open_catalog, writer_lock
from cloudvault.catalog.query import resolve_entry
from cloudvault.cli.ui import UI, human_size
from cloudvault.optimize import bytes_used, optimize, status
from cloudvault.verify import verify_entries, verify_sample


def parse_fraction(text: str) -> float:
    """'5%' or '0.05' -> 0.05."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise errors.UsageError(detail=f"--sample wants a fraction like 5% or 0.05, not {text!r}") from None
    if not 0 < value <= 1:
        raise errors.UsageError(detail=f"--sample must be above 0 and at most 100%, not {text!r}")
    return value


def run_verify(catalog: str | None, entry: str | None, sample: str | None, seed: int | None, as_json: bool) -> int:
    conn = open_catalog(config.catalog_path(catalog), readonly=True)
    ui = UI(as_json=as_json)
    if sample:
        if entry:
            raise errors.UsageError(detail="--sample checks the whole mirror; leave out the entry ID")
        report = verify_sample(conn, parse_fraction(sample), seed)
    else:
        scope = resolve_entry(conn, entry)[:2] if entry else None
        report = verify_entries(conn, scope)
    if as_json:
        ui.emit(report.to_json())
    else:
        for m in report.mismatches:
            where = f"{m.archive} :: {m.path}" if m.archive else m.path
            ui.line(f"MISMATCH {where}: {m.why}; expected {m.expected or '-'}, found {m.found or '-'}")
        verdict = "all match" if report.ok else f"{len(report.mismatches)} mismatch(es)"
        ui.line(f"verified {report.checked_files} files and {report.checked_members} archive members "
                f"({human_size(report.bytes_hashed)} hashed): {verdict}")  # fmt: skip
    return errors.OK if report.ok else errors.INTEGRITY


def run_optimize(
    catalog: str | None, entry: str | None, to: str | None, max_gb: float | None, show_status: bool, as_json: bool
) -> int:
    path = config.catalog_path(catalog)
    cache = Path(to) if to else config.cache_dir(path)
    ui = UI(as_json=as_json)
    with writer_lock(path):
        conn = open_catalog(path)
        if show_status:
            rows = status(conn)
            if as_json:
                ui.emit({"cache": str(cache), "bytes_used": bytes_used(conn), "copies": rows})
            for r in rows:
                ui.line(f"{r['archive']}: {human_size(r['archive_bytes'])} -> copy {human_size(r['copy_bytes'])}, "
                        f"{r['frames']} frames{'' if r['present'] else ' (MISSING)'}")  # fmt: skip
            ui.line(f"{len(rows)} seekable copies, {human_size(bytes_used(conn))} used in {cache}")
            return errors.OK
        scope = resolve_entry(conn, entry)[:2] if entry else None
        max_bytes = int(max_gb * 2**30) if max_gb is not None else None
        report = optimize(conn, cache, scope, max_bytes, on_archive=lambda p: ui.warn(f"writing seekable copy of {p}"))
    if as_json:
        ui.emit(report.to_json())
    else:
        for w in report.written:
            ui.line(f"{w['archive']} -> {w['copy']} ({human_size(w['bytes'])}, {w['frames']} frames)")
        for s in report.skipped:
            ui.line(f"skipped {s['archive']}: {s['why']}")
        ui.line(f"{len(report.written)} copies written; {human_size(report.bytes_used)} used in {cache}")
    return errors.OK
