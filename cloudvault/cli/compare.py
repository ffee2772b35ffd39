"""Compare two runs on two axes: outputs exactly, timings against measured run-to-run noise.

Outputs are token ids, output lengths and finish reasons, compared exactly; timings are TTFT, TPOT, E2E and
throughput of the measured requests.

RUN_A is the reference, RUN_B the run judged against it. Each is a result folder (a `vault repro` run folder or
any folder with per_request.csv / requests.jsonl), a run id from `vault runs`, or an entry: `014` is the folder
its repro recipe records, `014/data/ss20_temp0_c1024_rep2/20260925_072725` a folder of that entry, read through
the catalog and verified. The rules are the recipe's for RUN_A's entry (`--recipe` to choose). `--baseline RUN`
(repeatable) names more runs of A's kind (the same experiment on the same hardware): their spread with A is the
noise a timing of B is judged against; without one, a timing difference is inconclusive, never a change. Each is an
independent run: RUN_A, RUN_B or another baseline again (the same folder, or a copy) is refused, and one whose
settings differ from A's makes the comparison NOT_COMPARABLE. Nothing is written unless --out names a folder for
compare.csv, REPORT.md and timings.png. Exit 0 when REPRODUCED, 10 when not (OUTPUTS_DIVERGED, TIMINGS_CHANGED,
NOT_COMPARABLE); with --expect VERDICT, 0 when the verdict is that one (a check that a known divergence, like 014's
rep2, is still exactly what it was). See docs/repro.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from cloudvault.cli.common import add_output_options, opened_catalog

VERDICTS = ("REPRODUCED", "OUTPUTS_DIVERGED", "TIMINGS_CHANGED", "NOT_COMPARABLE", "DIVERGED")  # DIVERGED: alias


def add_arguments(parser) -> None:
    parser.add_argument("run_a", metavar="RUN_A", help="reference: folder, run id, ENTRY or ENTRY/FOLDER")
    parser.add_argument("run_b", metavar="RUN_B", help="compared run: folder, run id, ENTRY or ENTRY/FOLDER")
    parser.add_argument("--baseline", action="append", default=[], metavar="RUN",
                        help="another run of A's kind, for the timing noise (repeatable)")
    parser.add_argument("--recipe", help="take the compare rules and settings from this repro recipe")
    parser.add_argument("--all", dest="all_rows", action="store_true", help="list identical requests too")
    parser.add_argument("--out", help="write compare.csv and REPORT.md into this (new or empty) folder")
    parser.add_argument("--expect", choices=VERDICTS, help="exit 0 when the verdict is this one (a known divergence)")
    add_output_options(parser)


def run(args) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import compare as view
    from cloudvault.repro.judge import CompareOptions, compare_named_runs

    options = CompareOptions(args.run_a, args.run_b, tuple(args.baseline), args.recipe, args.out or None)
    with _catalog_when_asked(args) as connect:
        judged = compare_named_runs(options, connect)
    UI(as_json=args.json).present(judged, view.show_judged, all_rows=args.all_rows)
    return judged.exit_code(args.expect)


@contextlib.contextmanager
def _catalog_when_asked(args) -> Iterator[Callable]:
    """connect(): the catalog, opened read-only the first time a run named is an entry or a run id, closed when the
    block ends; connect(optional=True): None when there is no catalog."""
    with contextlib.ExitStack() as opened:
        conns = []

        def connect(optional: bool = False):
            if not conns:
                conn = opened.enter_context(opened_catalog(args, readonly=True, optional=optional))
                if conn is None:
                    return None
                conns.append(conn)
            return conns[0]

        yield connect
