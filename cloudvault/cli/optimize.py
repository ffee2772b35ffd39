"""Write seekable copies of single-frame archives (4 MiB frames) into a cache beside the catalog.

The mirror is never touched. Extraction then reads only the frames that cover a member, verified against the
same BLAKE3, and falls back to the original archive if a copy is gone.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, catalog_name


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
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import optimize as view
    from cloudvault.optimize import OptimizeRequest, copies_status, optimize_catalog

    max_bytes = int(args.max_gb * 2**30) if args.max_gb is not None else None
    request = OptimizeRequest(args.catalog, args.entry, args.to, max_bytes)
    ui = UI(as_json=args.json)
    if args.status:
        ui.present(copies_status(request), view.show_status)
    else:
        ui.present(optimize_catalog(request, on_archive=lambda path: view.writing(ui, path)), view.show)
    return errors.OK
