"""`vault diff` on a terminal: the generations compared, one line per path changed (its mark first), the counts."""

from __future__ import annotations


def show(ui, diff) -> None:
    ui.line(f"comparing generation {'(none)' if diff.before is None else diff.before} to generation {diff.after}")
    for mark, paths in (("+", diff.added), ("-", diff.removed), ("M", diff.modified),
                        ("C", diff.changed_in_place), ("D", diff.damaged)):  # fmt: skip
        for path in paths:
            ui.line(f"{mark}    {path}")
    ui.line(f"{len(diff.added)} added, {len(diff.removed)} removed, {len(diff.modified)} modified, "
            f"{len(diff.changed_in_place)} changed in place, {len(diff.damaged)} damaged")  # fmt: skip
