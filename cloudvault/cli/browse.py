"""Open the catalog in a web browser, read-only (Datasette): search, entries, archives, flags, restores, runs.

Serves the catalog on 127.0.0.1 (this machine only) and prints the URL; Ctrl-C stops it. The file is opened
read-only (mode=ro, or immutable in a folder you cannot write), and every page is a read: search with the
same query as `vault search`, one entry's summary with its cautions and settings, an archive's members with
size and BLAKE3, flags and damage, restores done, repro runs with their verdicts and per-request comparison.
Each hit carries the `vault show` / `vault extract` command that fetches it.
Needs the browse extra: pip install 'cloudvault[browse]'.
"""

from __future__ import annotations

from cloudvault import errors

DEFAULT_PORT = 8001


def add_arguments(parser) -> None:
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)")  # fmt: skip
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 opens it to the "
                        "network)")  # fmt: skip
    parser.add_argument("--no-open", action="store_true", help="only print the URL; do not open a web browser")


def run(args) -> int:
    from cloudvault.browse.server import browse_catalog
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import browse as view

    options = _options(args)
    ui = UI()
    browse_catalog(options, lambda serving: view.show_serving(ui, serving))
    view.show_stopped(ui)
    return errors.OK


def _options(args):
    from pathlib import Path

    from cloudvault import config
    from cloudvault.browse.server import BrowseOptions

    if not 0 <= args.port <= 65535:
        raise errors.UsageError(detail=f"--port {args.port}: give 0..65535")
    return BrowseOptions(Path(config.catalog_path(args.catalog)), args.host, args.port, not args.no_open)
