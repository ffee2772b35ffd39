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
from cloudvault.cli.common import add_output_options, opened_catalog


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
    from cloudvault import config
    from cloudvault.cli.ui import UI

    ui = UI(as_json=args.json)
    catalog = config.catalog_path(args.catalog)
    if args.action == "rm":
        return _remove(args, ui, catalog)
    from cloudvault.catalog.mirrors import known_everywhere

    with opened_catalog(path=catalog, readonly=True, optional=True) as conn:
        known = known_everywhere(conn, catalog)
    if args.json:
        ui.emit([k.to_json() for k in known])
    elif known:
        _show(ui, known)
    else:
        ui.line("no mirrors known; index one: vault index /path/to/mirror")
    return errors.OK if known else errors.NOTHING_FOUND


def _show(ui, known) -> None:
    def count(n: int | None) -> str:
        return "-" if n is None else str(n)

    width = max(len("NAME"), *(len(k.name) for k in known))
    ui.line(f"{'NAME':<{width}}  {'ENTRIES':>7}  {'FILES':>7}  {'MEMBERS':>9}  {'LAST INDEXED':<25}  STATE    ROOT")
    for k in known:
        state = {True: "present", False: "missing", None: "remote"}[k.present]
        row = k.to_json()
        other = "" if k.in_active_catalog else f"  (catalog {k.catalog})"
        ui.line(
            f"{k.name:<{width}}  {count(row['entries']):>7}  {count(row['files']):>7}  "
            f"{count(row['members']):>9}  {k.indexed_at or '-':<25}  {state:<7}  {k.root}{other}"
        )


def _remove(args, ui, catalog: str) -> int:
    """Under the catalog's writer lock (no index runs meanwhile): say what goes, confirm, remove."""
    import contextlib
    import os

    from cloudvault.catalog.db import writer_lock
    from cloudvault.catalog.mirrors import known_everywhere, mirrors_named, remove_known

    lock = writer_lock(catalog) if os.path.isfile(catalog) else contextlib.nullcontext()
    with lock, opened_catalog(path=catalog, readonly=False, optional=True) as conn:
        targets = mirrors_named(known_everywhere(conn, catalog), args.name, catalog)
        what = _what_goes(targets, catalog)
        _confirm(args, ui, what)
        lost = remove_known(conn, targets)
    done = targets[0]
    if args.json:
        ui.emit({"removed": done.name, "root": done.root, "catalog": done.catalog,
                 "lost": None if lost is None else lost.__dict__, "registry_only": lost is None})  # fmt: skip
    else:
        ui.line(f"removed mirror {done.name} from {'catalog ' + catalog if lost else 'the registry'}; "
                f"its files at {done.root} are untouched")  # fmt: skip
    return errors.OK


def _what_goes(targets, catalog: str) -> str:
    k = targets[0]
    if not k.in_active_catalog:
        return (f"mirror {k.name} ({k.root}) is only in the registry (its catalog {k.catalog} no longer holds "
                "it): forgetting it lets vault write there again")  # fmt: skip
    holds = k.holds
    kept = f"{holds.runs} run{'s' * (holds.runs != 1)} and {holds.restores} restore{'s' * (holds.restores != 1)}"
    return (f"mirror {k.name} ({k.root}) in catalog {catalog}: removing it loses {holds.lost()} "
            f"({kept} recorded against it are kept)")  # fmt: skip


def _confirm(args, ui, what: str) -> None:
    """--yes, or a yes typed on the terminal; never a guess when stdin is not a terminal."""
    if args.yes:
        if not args.json:
            ui.line(what)
        return
    if not sys.stdin.isatty():
        raise NotRemoved(what=what, why="pass --yes to remove it (stdin is not a terminal to ask on)")
    sys.stderr.write(f"vault: {what}\nremove it? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise NotRemoved(what=what, why="the answer was not yes")
