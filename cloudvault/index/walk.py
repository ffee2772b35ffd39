"""Which entry a mirror path belongs to, and which of its files are archives."""

from __future__ import annotations

from cloudvault.archive.formats import HEAD, archive_format, might_be_archive
from cloudvault.models import FileStat


def entry_of(path: str) -> str:
    """The entry a mirror path belongs to: its top-level directory, '' for files at the top."""
    head, sep, _ = path.partition("/")
    return head if sep else ""


def archive_formats(mirror, stats: list[FileStat]) -> dict[str, str]:
    """path -> archive format (archive/formats.py) of each walked file whose name makes it worth a look, from its
    first bytes; files that are no archive (or cannot be read: their reading says so) are left out."""
    found = {}
    for st in stats:
        if st.kind != "file" or not might_be_archive(st.path):
            continue
        try:
            with mirror.open(st.path, st.raw_path) as fh:
                head = fh.read(HEAD)
        except OSError:
            head = b""
        fmt = archive_format(head, st.path)
        if fmt is not None:
            found[st.path] = fmt
    return found
