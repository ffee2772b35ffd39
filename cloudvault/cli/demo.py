"""Build the built-in demo Marvell_cloud mirror, index it into its own catalog, and walk the users' journeys."""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, opened_catalog


def add_arguments(parser) -> None:
    parser.add_argument("--dir", dest="directory", help="where to build the demo (default: the XDG data dir)")
    add_output_options(parser)


def run(args) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import demo as view
    from cloudvault.demo.walk import walk_demo

    options = _options(args)
    ui = UI(as_json=args.json)
    walked = walk_demo(options, lambda argv: _walk(ui, str(options.catalog), argv, args.json),
                       built=lambda built: view.show_built(ui, built))  # fmt: skip
    ui.present(walked, view.show)
    return walked.exit_code


def _options(args):
    """Where the demo goes (--dir, else the XDG data dir), its catalog (--catalog, else one beside it) and the
    journeys every demo walks, as the user would type them."""
    from pathlib import Path

    from cloudvault import config
    from cloudvault.demo.walk import MIRROR, DemoOptions

    dest = Path(args.directory).expanduser() if args.directory else config.data_home() / "cloudvault" / "demo"
    out = str(dest / "extracted")
    journeys = (
        ("index", "--mirror", "marvell_cloud", MIRROR),
        ("search", "granite"),
        ("show", "014"),
        ("ls", "018", "dumps/*.json"),
        ("search", "HF_TOKEN", "--limit", "5"),
        ("extract", "018", "<last member>", "-o", out, "--archive", "breakdown", "--force"),
        ("optimize", "018"),
        ("extract", "018", "<last member>", "-o", out, "--archive", "breakdown", "--force"),
        ("verify", "--sample", "20%", "--seed", "1"),
    )
    return DemoOptions(dest, Path(args.catalog) if args.catalog else dest / "catalog.db", journeys)


def _walk(ui, db: str, argv: list[str], as_json: bool):
    """Run one journey as the user would type it; with --json its document is collected, not printed."""
    import contextlib
    import io
    import json

    from cloudvault.cli.main import run_command
    from cloudvault.cli.views import demo as view
    from cloudvault.demo.walk import JourneyWalked

    argv = [_last_member(db) if a == "<last member>" else a for a in argv]
    view.show_journey(ui, db, argv)
    if not as_json:
        return JourneyWalked(tuple(argv), _run_one(run_command, db, argv))
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        code = _run_one(run_command, db, [*argv, "--json"])
    text = captured.getvalue().strip()
    return JourneyWalked(tuple(argv), code, json.loads(text) if text else None)


def _run_one(run_command, db: str, argv: list[str]) -> int:
    """A journey that fails says so on stderr and the walk goes on (the demo shows, it does not stop)."""
    try:
        return run_command(["--catalog", db, *argv])
    except errors.VaultError as exc:
        import sys

        sys.stderr.write(f"vault: error: {exc.message}\n")
        return exc.exit_code


def _last_member(db: str) -> str:
    """The file member stored last in the single-frame demo archive: the worst case for a plain extract."""
    from cloudvault.catalog.lookup import last_member

    with opened_catalog(path=db, readonly=True) as conn:
        return last_member(conn, "breakdown_b8_n81.tar.zst")
