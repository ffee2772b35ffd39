"""Re-hash what the catalog recorded and name every mismatch: `vault verify 018`, `vault verify --sample 5%`.

The catalog itself is checked first (SQLite's integrity check). Exit 0 when everything matches; 5 when something
does not, when the catalog is damaged, or when files or members were never hashed (they cannot be checked).
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, catalog_name, with_catalog


def fraction(text: str) -> float:
    """'5%' or '0.05' -> 0.05; from 0.01% (smaller would check nothing on any real mirror) to 100%."""
    import math

    value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    if not (math.isfinite(value) and 1e-4 <= value <= 1):
        raise ValueError(text)
    return value


fraction.__name__ = "fraction (5% or 0.05)"


def add_arguments(parser) -> None:
    parser.add_argument("entry", nargs="?", type=catalog_name, help="entry ID or prefix; none: every entry")
    parser.add_argument("--sample", type=fraction, help="check a random fraction across the mirror, e.g. 5%%")
    parser.add_argument("--seed", type=int, help="seed for --sample, to repeat a check")
    add_output_options(parser)


@with_catalog(readonly=True)
def run(args, conn) -> int:
    from cloudvault.catalog.query import resolve_entry
    from cloudvault.cli.ui import UI, human_size
    from cloudvault.verify import verify_entries, verify_sample

    ui = UI(as_json=args.json)
    if args.sample is not None:
        if args.entry:
            raise errors.UsageError(detail="--sample checks the whole mirror; leave out the entry ID")
        report = verify_sample(conn, args.sample, args.seed)
    else:
        scope = resolve_entry(conn, args.entry)[:2] if args.entry else None
        report = verify_entries(conn, scope)
    if args.json:
        ui.emit(report.to_json())
    else:
        for m in report.mismatches:
            where = f"{m.archive} :: {m.path}" if m.archive else m.path
            ui.line(f"MISMATCH {where}: {m.why}; expected {m.expected or '-'}, found {m.found or '-'}")
        for f in report.flagged:
            ui.line(f"FLAGGED {f.path}{f' :: {f.member}' if f.member else ''}: {f.kind.replace('_', ' ')}: {f.detail}")
        ui.line(f"verified {report.checked_files} files and {report.checked_members} archive members "
                f"({human_size(report.bytes_hashed)} hashed): {_verdict(report)}")  # fmt: skip
    return errors.OK if report.ok else errors.INTEGRITY


def _verdict(report) -> str:
    parts = [f"{len(report.mismatches)} mismatch(es)"] if report.mismatches else []
    if report.flagged:
        parts.append(f"{len(report.flagged)} flagged changed in place or damaged by `vault index`")
    if report.unchecked:
        examples = f" (e.g. {', '.join(report.unchecked_examples)})" if report.unchecked_examples else ""
        parts.append(f"{report.unchecked} never hashed, so not checked{examples}; re-index to hash them")
    return "; ".join(parts) or "all match"
