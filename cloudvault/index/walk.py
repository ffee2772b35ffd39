"""Which entry a mirror path belongs to."""

from __future__ import annotations


def entry_of(path: str) -> str:
    """The entry a mirror path belongs to: its top-level directory, '' for files at the top."""
    head, sep, _ = path.partition("/")
    return head if sep else ""
