"""List the reproduction runs recorded in the catalog, with their status and verdict (all, or one entry's).

ENTRY is an entry id or unique prefix (`014`); each run shows its id, recipe, executor, status (running,
finished, failed, interrupted), verdict and folder. `--requests RUN_ID` lists one run's per-request verdicts.
A listing only reads the catalog. `vault runs collect [ENTRY]` collects each run left queued by `vault repro
--executor slurm --detach` whose job has ended: its outputs are compared with the record, by the recipe it was
queued with, and its verdict recorded, as if vault had waited; then it lists the runs as `vault runs` does.

  vault runs 014                 014's runs (reads the catalog only)
  vault runs collect 014         collect 014's detached runs whose jobs have ended, then list them
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, catalog_name, with_catalog

COLLECT = "collect"  # `vault runs collect [ENTRY]`: the one spelling that writes (an entry is never named this)


def add_arguments(parser) -> None:
    import argparse  # imported by the grammar already

    parser.add_argument("entry", nargs="?", metavar="ENTRY", type=catalog_name,
                        help="only the runs reproducing this entry")  # fmt: skip
    parser.add_argument("collect_entry", nargs="?", type=catalog_name, help=argparse.SUPPRESS)
    parser.add_argument("--requests", metavar="RUN_ID", help="the per-request verdicts of one run")
    add_output_options(parser)


def _options(args):
    """`vault runs collect [ENTRY]`: ENTRY is where a listing has it; two ENTRYs are a usage error."""
    from cloudvault.repro.recorded import RunsOptions

    if args.entry == COLLECT:
        return RunsOptions(args.collect_entry, True, args.requests)
    if args.collect_entry is not None:
        raise errors.UsageError(detail=f"vault runs takes one ENTRY, not {args.entry!r} and {args.collect_entry!r}")
    return RunsOptions(args.entry, False, args.requests)


@with_catalog(readonly=lambda args: not _options(args).collect)
def run(args, conn) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import runs as view
    from cloudvault.repro.recorded import recorded_runs

    ui = UI(as_json=args.json)
    result = recorded_runs(conn, _options(args), warn=ui.warn)
    ui.present(result, view.show)
    view.warn(ui, result)
    return result.exit_code
