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
    from cloudvault.demo.walk import DemoOptions

    dest = Path(args.directory).expanduser() if args.directory else config.data_home() / "cloudvault" / "demo"
    catalog = Path(args.catalog) if args.catalog else dest / "catalog.db"
    return DemoOptions(dest, catalog, lambda: (*_core_journeys(dest), *_env_journeys(dest), *_image_journeys(),
                                               *_repro_journeys(dest)))  # fmt: skip


def _core_journeys(dest) -> list[tuple[str, ...]]:
    """Index, search, show, ls, a secret found, extract before and after optimize, verify a sample."""
    from cloudvault.demo.walk import MIRROR

    out = str(dest / "extracted")
    return [
        ("index", "--mirror", "marvell_cloud", MIRROR),
        ("search", "granite"),
        ("show", "014"),
        ("ls", "018", "dumps/*.json"),
        ("search", "HF_TOKEN", "--limit", "5"),
        ("extract", "018", "<last member>", "-o", out, "--archive", "breakdown", "--force"),
        ("optimize", "018"),
        ("extract", "018", "<last member>", "-o", out, "--archive", "breakdown", "--force"),
        ("verify", "--sample", "20%", "--seed", "1"),
    ]


def _env_journeys(dest) -> list[tuple[str, ...]]:
    """The packed envs (demo/envs.py): listed, planned, restored at a new prefix, one moved, then found."""
    envs = dest / "restored-envs"
    return [
        ("restore", "env", "nebius", "--list"),
        ("restore", "env", "nebius", "--dry-run"),
        ("restore", "env", "nebius", "--to", str(envs / "miniforge3"), "--force"),
        ("restore", "env", "nebius", "specdec", "--prefix", str(envs / "specdec"), "--force"),
        ("restore", "env", "nebius", "vaultdemo", "--move", str(envs / "miniforge3/envs/vaultdemo"),
         "--prefix", str(envs / "moved/vaultdemo"), "--force"),  # fmt: skip
        ("restore", "env", "runpod", "probe_mini", "--prefix", str(envs / "workspace/probe_mini"), "--force"),
        ("search", "restored"),
    ]


def _image_journeys() -> list[tuple[str, ...]]:
    """The images (demo/images.py): list them and check the GPU (no daemon needed); restore one when a docker
    daemon answers, else say in one line that the load is skipped."""
    import sys

    from cloudvault.tools.docker import daemon_reachable

    steps = [("restore", "docker", "--list"), ("restore", "docker", "tandemspec", "--check-gpu")]
    if daemon_reachable():
        return [*steps, ("restore", "docker", "tandemspec")]
    sys.stderr.write("vault: demo: skipping the real `vault restore docker tandemspec` load: no docker daemon "
                     "answers (start dockerd, or set DOCKER_HOST)\n")  # fmt: skip
    return steps


def _repro_journeys(dest) -> list[tuple[str, ...]]:
    """Reproduction (demo/serving.py): the lab's rep2 check, a stand-in re-run, the plot and report recipes."""
    from cloudvault.demo.serving import E014, REP2, SERVING

    runs = str(dest / "runs")  # beside the mirror, never inside it
    return [
        ("index", str(dest / SERVING)),
        ("repro", "--list"),
        ("compare", "014", "014" + REP2[len(E014) :], "--expect", "DIVERGED"),  # the lab's rep2: 23/24
        ("repro", "014_ss20_temp0", "--standin", "--out", runs),
        ("repro", "016_plots", "--out", runs),
        ("repro", "serving_c4_mtp_ab", "--out", runs),
        ("runs", "014"),
    ]


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
