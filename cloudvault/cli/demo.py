"""Build the built-in demo Marvell_cloud mirror, index it into its own catalog, and walk the users' journeys."""

from __future__ import annotations

from cloudvault import errors


def add_arguments(parser) -> None:
    parser.add_argument("--dir", dest="directory", help="where to build the demo (default: the XDG data dir)")
    parser.add_argument("--json", action="store_true", help="print JSON documents on stdout")


def run(args) -> int:
    import shlex
    import time
    from pathlib import Path

    from cloudvault import config
    from cloudvault.cli.main import run_command
    from cloudvault.cli.ui import UI
    from cloudvault.demo.build import build_demo, demo_parts

    dest = Path(args.directory).expanduser() if args.directory else config.data_home() / "cloudvault" / "demo"
    ui = UI(as_json=args.json)
    started = time.monotonic()
    root = build_demo(dest)
    db = str(Path(args.catalog) if args.catalog else dest / "catalog.db")
    out = str(dest / "extracted")
    json_flag = ["--json"] if args.json else []
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
    code = errors.OK
    for argv in journeys:
        argv = [_last_member(db) if a == "<last member>" else a for a in argv]
        ui.line()
        ui.heading("$ vault --catalog " + shlex.join([db, *argv]))
        result = run_command(["--catalog", db, *argv, *json_flag])
        if argv[0] == "index" and result != errors.OK:
            code = result
    ui.line()
    ui.line(f"try it yourself: export VAULT_CATALOG={shlex.quote(db)}; vault search b16r64")
    return code


def _last_member(db: str) -> str:
    """The file member stored last in the single-frame demo archive: the worst case for a plain extract."""
    from pathlib import Path

    from cloudvault.catalog.db import open_catalog
    from cloudvault.catalog.lookup import last_member

    conn = open_catalog(Path(db), readonly=True)
    try:
        return last_member(conn, "breakdown_b8_n81.tar.zst")
    finally:
        conn.close()
