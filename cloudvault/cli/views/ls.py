"""`vault ls` on a terminal: one line per file or member (kind, size, hash, path, archive), or why nothing was."""

from __future__ import annotations

from cloudvault.cli.ui import human_size


def show(ui, listing, asked: str) -> None:
    """The listing; nothing listed: a warning naming the entry (asked: the ID as the user wrote it)."""
    for h in listing.hits:
        digest = (h.blake3 or "-")[:16]
        where = f"  in {h.archive}" if h.archive else ""
        ui.line(f"{h.kind:<7} {human_size(h.size):>10}  {digest:<16}  {h.path}{where}")
    if not listing.hits:
        pattern = listing.pattern
        what = f"matches {pattern!r}; `vault ls {asked}` lists everything" if pattern else "is indexed"
        ui.warn(f"nothing in {listing.entry} {what}")
