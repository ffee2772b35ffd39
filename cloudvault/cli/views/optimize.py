"""`vault optimize` on a terminal: a line per copy written or archive skipped, or why none was needed, then the
space used; `--status`: a line per copy, then the count and the space."""

from __future__ import annotations

from cloudvault.cli.ui import human_size


def writing(ui, archive: str) -> None:
    """Said on stderr as each copy starts (it may take a while)."""
    ui.warn(f"writing seekable copy of {archive}")


def show(ui, report) -> None:
    for w in report.written:
        ui.line(f"{w.archive} -> {w.copy} ({human_size(w.bytes)}, {w.frames} frames)")
    for s in report.skipped:
        ui.line(f"skipped {s.archive}: {s.why}")
    if not report.written and not report.skipped:
        ui.line(f"nothing written: {_why_none(report)}")
    if report.written or report.cache_made:  # never a figure for a folder that was not made
        ui.line(f"{len(report.written)} copies written; {human_size(report.bytes_used)} used in {report.cache}")


def _why_none(report) -> str:
    """One line on why optimize had nothing to copy (and so created no cache folder)."""
    from cloudvault.archive.seekable import FRAME_RAW

    reasons = []
    if report.multi_frame:
        reasons.append(f"{report.multi_frame} archive(s) already multi-frame (seekable)")
    if report.small:
        reasons.append(f"{report.small} archive(s) with no frame over {human_size(2 * FRAME_RAW)} (read whole)")
    if not reasons:
        return "no archive in scope lacks a seekable copy"
    return "; ".join(reasons) + ": no copy needed"


def show_status(ui, status) -> None:
    for c in status.copies:
        ui.line(f"{c.archive}: {human_size(c.archive_bytes)} -> copy {human_size(c.copy_bytes)}, "
                f"{c.frames} frames{'' if c.present else ' (MISSING)'}")  # fmt: skip
    ui.line(f"{len(status.copies)} seekable copies, {human_size(status.bytes_used)} used in {status.cache}")
