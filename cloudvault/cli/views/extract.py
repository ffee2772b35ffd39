"""`vault extract` on a terminal: a line per file written and the total, or a line on stderr when the bytes went
to stdout; warnings and what --salvage left out go to stderr."""

from __future__ import annotations

import sys

from cloudvault.cli.ui import human_size


def warn_secret(label: str, detail: str) -> None:
    sys.stderr.write(f"vault: warning: {label} is flagged as holding a secret ({detail}); keep it private\n")


def note_one_xz_block(path: str, raw_size: int) -> None:
    """Why reading a member of a large one-block xz archive takes a while (said once per archive)."""
    sys.stderr.write(f"vault: note: {path} is one xz block ({human_size(raw_size)} decompressed): each member "
                     "is decoded from the archive's start; `xz -T0` or `xz --block-size=16MiB` makes it "
                     "seekable\n")  # fmt: skip


def note_without_pieces(report) -> None:
    if report.without_pieces:
        sys.stderr.write(f"vault: note: {len(report.without_pieces)} file(s) indexed without piece hashes were held "
                         "back whole until verified; `vault index` records their pieces\n")  # fmt: skip


def show(ui, report, to_stdout: bool) -> None:
    """What was written where, with its hash and status, then the count and the bytes decompressed."""
    if to_stdout:
        sys.stderr.write(f"vault: {len(report.written)} member(s) written to stdout, verified\n")
        return
    for w in report.written:
        ui.line(f"{w.dest}  {human_size(w.size)}  blake3 {(w.blake3 or '-')[:16]} {w.status}")
    ui.line(f"{len(report.written)} written, {human_size(report.bytes_decompressed)} decompressed")


def show_salvage(report) -> None:
    """What --salvage left out, one line each on stderr, and the count."""
    for label, why in report.not_written:
        sys.stderr.write(f"vault: not salvaged: {why if label in why else f'{label}: {why}'}\n")
    if report.not_written:
        sys.stderr.write(f"vault: salvage: {len(report.written)} written, {len(report.not_written)} not written "
                         "(damaged since they were indexed; `vault verify` names the damage)\n")  # fmt: skip
