"""`vault verify` on a terminal: a line per mismatch and per flagged object, then the verdict."""

from __future__ import annotations

from cloudvault.catalog.integrity import UNREAD_FLAGS
from cloudvault.cli.ui import human_size


def show(ui, report) -> None:
    """MISMATCH and FLAGGED lines, then what was checked and the verdict."""
    for m in report.mismatches:
        where = f"{m.archive} :: {m.path}" if m.archive else m.path
        ui.line(f"MISMATCH {where}: {m.why}; expected {m.expected or '-'}, found {m.found or '-'}")
    for f in report.flagged:
        ui.line(f"FLAGGED {f.path}{f' :: {f.member}' if f.member else ''}: {f.kind.replace('_', ' ')}: {f.detail}")
    ui.line(f"verified {report.checked_files} files and {report.checked_members} archive members "
            f"({human_size(report.bytes_hashed)} hashed): {verdict(report)}")  # fmt: skip


def verdict(report) -> str:
    parts = [f"{len(report.mismatches)} mismatch(es)"] if report.mismatches else []
    unread = sum(1 for f in report.flagged if f.kind in UNREAD_FLAGS)
    if len(report.flagged) > unread:
        parts.append(f"{len(report.flagged) - unread} flagged changed in place or damaged by `vault index`")
    if unread:
        parts.append(f"{unread} zip member(s) vault does not read (encrypted, or in a method it has no decoder for)")
    if report.unchecked:
        examples = f" (e.g. {', '.join(report.unchecked_examples)})" if report.unchecked_examples else ""
        parts.append(f"{report.unchecked} never hashed, so not checked{examples}; re-index to hash them")
    return "; ".join(parts) or "all match"
