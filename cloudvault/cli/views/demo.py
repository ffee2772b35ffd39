"""`vault demo` on a terminal: the mirror built, then (after the journeys, which speak for themselves) how to go on."""

from __future__ import annotations


def show_journey(ui, db: str, argv: list[str]) -> None:
    """The command line a journey runs, as the user would type it."""
    import shlex

    ui.line()
    ui.heading("$ vault --catalog " + shlex.join([db, *argv]))


def show_built(ui, built) -> None:
    ui.line(f"built the demo mirror at {built.mirror} in {built.seconds:.1f} s")


def show(ui, walked) -> None:
    ui.line()
    ui.line(f"try it yourself: export VAULT_CATALOG={walked.catalog}; vault search b16r64")
