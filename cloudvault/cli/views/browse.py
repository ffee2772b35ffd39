"""`vault browse` on a terminal: where the catalog is served (said out loud when others can reach it), then stopped."""

from __future__ import annotations


def show_serving(ui, serving) -> None:
    """The URL line, flushed: whoever started the server waits for it."""
    import sys

    if not serving.loopback:
        ui.warn(f"listening on {serving.host}: anyone who can reach this machine can read the catalog")
    ui.line(f"serving {serving.catalog} read-only at {serving.url} (Ctrl-C to stop)")
    sys.stdout.flush()


def show_stopped(ui) -> None:
    ui.line("stopped")
