"""List the mirrors vault knows (the catalog's and every other one this user indexed), or remove one.

`vault mirrors` shows each mirror's display name, entries, files, archive members, when it was last indexed,
whether its root is present or missing, and its root; mirrors another catalog of this user indexed (the
per-user registry in $XDG_STATE_HOME/cloudvault) follow, with that catalog. vault never writes into any of them.

`vault mirrors rm NAME` removes a mirror (by display name or root) from the active catalog: its entries, files,
members, flags and seekable copies go in one transaction; runs and restores recorded against it are kept. What
the catalog loses is said first, then it asks on a terminal; without a terminal, --yes is needed. A mirror only
the registry knows (its catalog deleted) is forgotten the same way. The mirror's own files are never touched.
"""

from __future__ import annotations

import sys

from cloudvault import errors
from cloudvault.cli.common import add_output_options


class NotRemoved(errors.UsageError):
    """nothing was removed: {what}; {why}"""


def add_arguments(parser) -> None:
    import argparse  # imported by the grammar already

    add_output_options(parser)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser), prog="vault mirrors")
    rm = sub.add_parser("rm", help="remove a mirror from the catalog (asks first)", prog="vault mirrors rm",
                        description="Remove a mirror's rows from the catalog; its files stay.")  # fmt: skip
    rm.add_argument("name", metavar="NAME", help="the mirror's display name (as `vault mirrors` shows it) or root")
    rm.add_argument("--yes", action="store_true", help="remove without asking")
    add_output_options(rm)
    # --json holds given before `rm` or after it: a subcommand's default would reset the one given before
    next(action for action in rm._actions if action.dest == "json").default = argparse.SUPPRESS


def run(args) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import mirrors as view
    from cloudvault.known_mirrors import known_mirrors, remove_mirror

    ui = UI(as_json=args.json)
    if args.action == "rm":
        removed = remove_mirror(
            args.catalog, args.name, lambda targets, catalog: _confirm(args, ui, view.what_goes(targets, catalog))
        )
        ui.present(removed, view.show_removed)
        return errors.OK
    known = known_mirrors(args.catalog)
    ui.present(known, view.show)
    return errors.OK if known.mirrors else errors.NOTHING_FOUND


def _confirm(args, ui, what: str) -> None:
    """--yes, or a yes typed on the terminal; never a guess when stdin is not a terminal."""
    from cloudvault.cli.views import mirrors as view

    if args.yes:
        if not args.json:
            view.going(ui, what)
        return
    if not sys.stdin.isatty():
        raise NotRemoved(what=what, why="pass --yes to remove it (stdin is not a terminal to ask on)")
    sys.stderr.write(f"vault: {what}\nremove it? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise NotRemoved(what=what, why="the answer was not yes")
