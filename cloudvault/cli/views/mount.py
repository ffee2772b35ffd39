"""`vault mount` on a terminal: where the mount answers, the process serving it, and how to end it."""

from __future__ import annotations


def show(ui, m) -> None:
    """One line, said as soon as the mount answers."""
    ui.line(f"mounted at {m.mountpoint} (pid {m.pid}, log {m.log}); `vault umount {m.mountpoint}` ends it")
