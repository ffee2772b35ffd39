"""`vault log` on a terminal: one line per index generation with what it counted."""

from __future__ import annotations


def show(ui, log) -> None:
    for g in log.generations:
        c = g.counts
        when = g.finished_at or f"{g.started_at} (stopped before its end)"
        ui.line(f"generation {g.number}  {when}  {', '.join(g.mirrors) or '-'}: {c.seen} seen, {c.read} read, "
                f"{c.added} added, {c.modified} modified, {c.removed} removed, "
                f"{c.changed_in_place} changed in place, {c.newly_damaged} newly damaged")  # fmt: skip
    if not log.generations:
        ui.warn("no index generations yet: `vault index MIRROR` makes the first")
