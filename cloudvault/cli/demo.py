"""Build the built-in demo Marvell_cloud mirror, index it into its own catalog, and walk the users' journeys."""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, opened_catalog


def add_arguments(parser) -> None:
    parser.add_argument("--dir", dest="directory", help="where to build the demo (default: the XDG data dir)")
    add_output_options(parser)


def run(args) -> int:
    import time
    from pathlib import Path

    from cloudvault import config
    from cloudvault.cli.ui import UI
    from cloudvault.demo.build import build_demo, demo_parts

    dest = Path(args.directory).expanduser() if args.directory else config.data_home() / "cloudvault" / "demo"
    db = Path(args.catalog) if args.catalog else dest / "catalog.db"
    errors.require_tool("zstd", "zstd", "to build the demo's archives as the lab made them")
    errors.require_tool("pzstd", "zstd", "to build the demo's multi-frame archives")
    _claim_catalog(db)
    ui = UI(as_json=args.json)
    started = time.monotonic()
    root = build_demo(dest)
    out = str(dest / "extracted")
    ui.line(f"built the demo mirror at {root} in {time.monotonic() - started:.1f} s")
    journeys = [
        ["index", "--mirror", "marvell_cloud", str(root)],
        ["search", "granite"],
        ["show", "014"],
        ["ls", "018", "dumps/*.json"],
        ["search", "HF_TOKEN", "--limit", "5"],
        ["extract", "018", "<last member>", "-o", out, "--archive", "breakdown", "--force"],
        ["optimize", "018"],
        ["extract", "018", "<last member>", "-o", out, "--archive", "breakdown", "--force"],
        ["verify", "--sample", "20%", "--seed", "1"],
    ]
    for part in demo_parts():
        if hasattr(part, "journeys"):
            journeys += part.journeys(dest, root)
    walked = [_walk(ui, str(db), argv, args.json) for argv in journeys]
    if args.json:
        ui.emit({"mirror": str(root), "catalog": str(db), "journeys": walked})
    ui.line()
    ui.line(f"try it yourself: export VAULT_CATALOG={db}; vault search b16r64")
    return walked[0]["exit_code"]  # the index: 5 if the demo's damage flags were not all expected


def _claim_catalog(db) -> None:
    """The demo writes only into a catalog it created: never into the user's real one."""
    from cloudvault.catalog.db import meta_value, set_meta_value

    if db.exists():
        with opened_catalog(path=db, readonly=True) as conn:
            ours = meta_value(conn, "demo") == "1"
        if not ours:
            raise errors.UsageError(detail=f"{db} is a catalog that `vault demo` did not create; refusing to write "
                                    "the demo into it (leave out --catalog, or name a new file)")  # fmt: skip
        return
    with opened_catalog(path=db, readonly=False, create=True) as conn:
        set_meta_value(conn, "demo", "1")


def _walk(ui, db: str, argv: list[str], as_json: bool) -> dict:
    """Run one journey as the user would type it; with --json its document is collected, not printed."""
    import contextlib
    import io
    import json
    import shlex

    from cloudvault.cli.main import run_command

    argv = [_last_member(db) if a == "<last member>" else a for a in argv]
    ui.line()
    ui.heading("$ vault --catalog " + shlex.join([db, *argv]))
    if not as_json:
        return {"argv": argv, "exit_code": _run_one(run_command, db, argv)}
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        code = _run_one(run_command, db, [*argv, "--json"])
    text = captured.getvalue().strip()
    return {"argv": argv, "exit_code": code, "output": json.loads(text) if text else None}


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
