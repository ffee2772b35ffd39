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

from cloudvault import errors
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
    import contextlib

    from cloudvault.cli.ui import UI

    ui = UI(as_json=args.json)
    with contextlib.ExitStack() as opened:  # the catalog, opened only when a run names an entry or a run id
        conns = []

        def connect():
            if not conns:
                conns.append(opened.enter_context(opened_catalog(args, readonly=True)))
            return conns[0]

        return _compare(args, ui, connect)


def _compare(args, ui, connect) -> int:
    import os
    from pathlib import Path

    from cloudvault import config
    from cloudvault.cli.views import compare as view
    from cloudvault.repro import compare, sources
    from cloudvault.repro.judge import judge

    a = sources.resolve(args.run_a, connect)
    b = sources.resolve(args.run_b, connect)
    baselines = tuple(sources.resolve(text, connect) for text in args.baseline)
    compare.check_baselines(a, b, baselines)
    judged = judge(a, b, _config(args.recipe, a), baselines=baselines)
    if args.out:
        from cloudvault.catalog.mirror_guard import refuse_write_into_mirror

        known = os.path.exists(config.catalog_path(args.catalog))
        refuse_write_into_mirror(connect() if known else None, args.out, "compare --out")
        _write(Path(args.out), judged)
    if args.json:
        ui.emit(judged.to_json())
    else:
        ui.line(f"A {a.where}")
        ui.line(f"B {b.where}")
        for r in baselines:
            ui.line(f"  baseline {r.where}")
        view.show(ui, judged.comparison, all_rows=args.all_rows)
        view.show_totals(ui, judged.totals)
    if args.expect:
        return errors.OK if judged.verdict == compare.ALIASES.get(args.expect, args.expect) else errors.REPRO_MISMATCH
    return errors.OK if judged.verdict in compare.PASSING else errors.REPRO_MISMATCH


def _config(name, a):
    """The compare rules, the settings compared, the near-tie margin and the timing noise floors: --recipe, else
    RUN_A's entry's recipe."""
    from cloudvault.repro import sources
    from cloudvault.repro.compare import DEFAULT_NEAR_TIE, DEFAULT_RULES
    from cloudvault.repro.judge import CompareConfig
    from cloudvault.repro.recipe import load

    recipe = load(name) if name else None
    if recipe is None and a.entry:
        recipe = next((r for r in sources.recipes_for(a.entry) if r.kind == "harness"), None)
    if recipe is None:
        return CompareConfig(dict(DEFAULT_RULES), None, DEFAULT_NEAR_TIE, {})
    return CompareConfig(*recipe.compare_config(), recipe.noise_floors())


def _write(out, judged) -> None:
    from cloudvault.repro.judge import write_report

    if out.exists() and not out.is_dir():
        raise errors.UsageError(detail=f"{out} is not a folder; --out names a folder for compare.csv and REPORT.md")
    held = [n for n in ("compare.csv", "REPORT.md") if (out / n).exists()]
    if held:  # compare has no --force: name what the user can do instead
        raise errors.UsageError(detail=f"{out} already holds a comparison ({', '.join(held)}); "
                                "name a new --out folder, or remove those files first")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    a, b = judged.a, judged.b
    write_report(out, judged.comparison, title="vault compare", labels=(a.where, b.where), totals=judged.totals,
                 baselines=tuple(r.where for r in judged.baselines),
                 plotted=((a.where, a.rows), (b.where, b.rows)))  # fmt: skip
