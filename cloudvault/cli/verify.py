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
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import verify as view
    from cloudvault.verify import verify

    if args.sample is not None and args.entry:
        raise errors.UsageError(detail="--sample checks the whole mirror; leave out the entry ID")
    report = verify(conn, args.entry, args.sample, args.seed)
    ui = UI(as_json=args.json)
    ui.present(report, view.show)
    return errors.OK if report.ok else errors.INTEGRITY
