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
    parser.add_argument(
        "path", type=catalog_name, help="member or file path, unique suffix, glob, folder, or x.tar.zst/inner"
    )
    parser.add_argument("-o", "--output", help="folder to write into (default .); - for stdout")
    parser.add_argument("--archive", type=catalog_name, help="only this archive (unique prefix of its file name)")
    parser.add_argument("--keep-path", action="store_true", help="keep the member's folders under the output")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    parser.add_argument("--allow-outside-links", action="store_true", help="create symlinks pointing outside")
    add_output_options(parser)


def run(args) -> int:
    import sys

    from cloudvault.catalog.flagged import secret_flags
    from cloudvault.catalog.query import resolve_entry
    from cloudvault.cli.ui import UI, human_size
    from cloudvault.extract import extract, find_targets

    if not args.path.strip():
        raise errors.UsageError(detail="give a member path to extract")
    dest = None if args.output == "-" else args.output or "."
    ui = UI(as_json=args.json and dest is not None)
    with opened_catalog(args, readonly=True) as conn:
        mirror_id, entry_id, _ = resolve_entry(conn, args.entry)
        targets = find_targets(conn, mirror_id, entry_id, args.path, args.archive)
        for label, detail in secret_flags(conn, targets):
            sys.stderr.write(f"vault: warning: {label} is flagged as holding a secret ({detail}); keep it private\n")
        total = sum(t.size for t in targets)
        progress = ui.progress("extracting") if total > PROGRESS_OVER else None
        if progress:
            progress.start(total, len(targets))
        report = extract(conn, targets, dest, keep_path=args.keep_path, force=args.force,
                         allow_outside_links=args.allow_outside_links, progress=progress)  # fmt: skip
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
    return errors.OK
