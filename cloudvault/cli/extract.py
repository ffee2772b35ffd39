"""Pull members out of an archive without decompressing the rest of it, verified against the catalog's BLAKE3.

PATH is a member or file path, a unique suffix, a glob, a folder, or x.tar.zst/inner (any archive: x.tgz/inner,
x.zip/inner). Multi-frame archives, and gzip, bzip2 and multi-block xz through their seek points, are entered near
the member; single-frame ones are read from the start and stop at the member's end. Exit 5 on a hash mismatch or a
changed archive (nothing is left behind).
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, catalog_name, opened_catalog

PROGRESS_OVER = 8 << 20  # a bar only when there is something to wait for


def add_arguments(parser) -> None:
    parser.add_argument("entry", type=catalog_name, help="entry ID or unique prefix, e.g. 018")
    parser.add_argument("paths", nargs="*", metavar="PATH", type=catalog_name,
                        help="member or file path, unique suffix, glob, folder, or x.tar.zst/inner (one; with "
                        "--salvage any number, none: the whole entry)")  # fmt: skip
    parser.add_argument("-o", "--output", help="folder to write into (default .); - for stdout")
    parser.add_argument("--archive", type=catalog_name, help="only this archive (unique prefix of its file name)")
    parser.add_argument("--keep-path", action="store_true", help="keep the member's folders under the output")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    parser.add_argument("--allow-outside-links", action="store_true", help="create symlinks pointing outside")
    parser.add_argument("--salvage", action="store_true",
                        help="from a damaged archive: write every member that still verifies (keeping their "
                        "folders), report the rest, exit 5 if any is left out")  # fmt: skip
    add_output_options(parser)


def run(args) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import extract as view
    from cloudvault.extract import ExtractOptions, ExtractRequest, extract_entry

    if not args.salvage and len(args.paths) != 1 or any(not p.strip() for p in args.paths):
        raise errors.UsageError(detail="give one member path to extract (any number with --salvage)")
    dest = None if args.output == "-" else args.output or "."
    ui = UI(as_json=args.json and dest is not None)
    options = ExtractOptions(keep_path=args.keep_path or args.salvage, force=args.force,
                             allow_outside_links=args.allow_outside_links, salvage=args.salvage)  # fmt: skip
    request = ExtractRequest(args.entry, args.paths or ["*"], args.archive, dest, options)
    with opened_catalog(args, readonly=True) as conn:
        report = extract_entry(conn, request, view.warn_secret, _progress_for(ui), view.note_one_xz_block)
    view.note_without_pieces(report)
    ui.present(report, view.show, to_stdout=dest is None)
    if args.salvage:
        view.show_salvage(report)
    return errors.INTEGRITY if args.salvage and report.not_written else errors.OK


def _progress_for(ui):
    """A bar only when there is something to wait for."""

    def start(total: int, count: int):
        if total <= PROGRESS_OVER:
            return None
        progress = ui.progress("extracting")
        progress.start(total, count)
        return progress

    return start
