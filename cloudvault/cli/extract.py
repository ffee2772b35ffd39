"""Pull members out of an archive without decompressing the rest of it, verified against the catalog's BLAKE3.

PATH is a member or file path, a unique suffix, a glob, a folder, or x.tar.zst/inner. Multi-frame archives are
entered at the frame that holds the member; single-frame ones are read from the start and stop at the member's
end. Exit 5 on a hash mismatch or a changed archive (nothing is left behind).
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
    import sys

    from cloudvault.catalog.flagged import secret_flags
    from cloudvault.catalog.query import resolve_entry
    from cloudvault.cli.ui import UI, human_size
    from cloudvault.extract import ExtractOptions, extract

    if not args.salvage and len(args.paths) != 1 or any(not p.strip() for p in args.paths):
        raise errors.UsageError(detail="give one member path to extract (any number with --salvage)")
    dest = None if args.output == "-" else args.output or "."
    ui = UI(as_json=args.json and dest is not None)
    with opened_catalog(args, readonly=True) as conn:
        mirror_id, entry_id, _ = resolve_entry(conn, args.entry)
        targets = _targets(conn, mirror_id, entry_id, args.paths or ["*"], args.archive)
        for label, detail in secret_flags(conn, targets):
            sys.stderr.write(f"vault: warning: {label} is flagged as holding a secret ({detail}); keep it private\n")
        total = sum(t.size for t in targets)
        progress = ui.progress("extracting") if total > PROGRESS_OVER else None
        if progress:
            progress.start(total, len(targets))
        options = ExtractOptions(keep_path=args.keep_path or args.salvage, force=args.force,
                                 allow_outside_links=args.allow_outside_links, salvage=args.salvage)  # fmt: skip
        report = extract(conn, targets, dest, options, progress)
    if report.without_pieces:
        sys.stderr.write(f"vault: note: {len(report.without_pieces)} file(s) indexed without piece hashes were held "
                         "back whole until verified; `vault index` records their pieces\n")  # fmt: skip
    if ui.as_json:
        ui.emit(report.to_json())
    elif dest is not None:
        for w in report.written:
            ui.line(f"{w.dest}  {human_size(w.size)}  blake3 {(w.blake3 or '-')[:16]} {w.status}")
        ui.line(f"{len(report.written)} written, {human_size(report.bytes_decompressed)} decompressed")
    else:
        sys.stderr.write(f"vault: {len(report.written)} member(s) written to stdout, verified\n")
    return _salvage_summary(report) if args.salvage else errors.OK


def _targets(conn, mirror_id: int, entry_id: str, paths: list[str], archive: str | None) -> list:
    from cloudvault.extract import find_targets

    found: dict = {}
    for path in paths:
        found.update({(t.file_id, t.path, t.data_offset): t for t in find_targets(conn, mirror_id, entry_id, path,
                                                                                  archive)})  # fmt: skip
    read_as_archives = {t.file_id for t in found.values() if t.archive}  # its members, not its compressed bytes
    return [t for t in found.values() if t.archive or t.file_id not in read_as_archives]


def _salvage_summary(report) -> int:
    """What --salvage left out, one line each on stderr; exit 5 when anything was."""
    import sys

    for label, why in report.not_written:
        sys.stderr.write(f"vault: not salvaged: {why if label in why else f'{label}: {why}'}\n")
    if report.not_written:
        sys.stderr.write(f"vault: salvage: {len(report.written)} written, {len(report.not_written)} not written "
                         "(damaged since they were indexed; `vault verify` names the damage)\n")  # fmt: skip
        return errors.INTEGRITY
    return errors.OK
