"""The one compare-and-report pipeline: run A judged against run B (settings compared, outputs exactly, timings
against the noise of A's kind), and the report written beside it (compare.csv, timings.png, REPORT.md). `vault
compare` (compare_named_runs, its one call) and `vault repro` both go through here; the terminal's view of it is
cli/views/compare.py."""

from __future__ import annotations

import sqlite3
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cloudvault import errors
from cloudvault.repro import report
from cloudvault.repro.compare import RunComparison, baseline_differences, compare_runs, settings_differences
from cloudvault.repro.results import Results

# the recipe's compare section: rules per column, the settings compared (None: all shared), the near-tie margin,
# the timing noise floors per metric
CompareConfig = namedtuple("CompareConfig", "rules settings near_tie floors")


@dataclass(frozen=True)
class Judged:
    """A comparison, the two runs it judged (and the baselines of A's kind), their measured totals."""

    comparison: RunComparison
    a: Results
    b: Results
    baselines: tuple[Results, ...] = ()
    totals: tuple[dict, dict] | None = None

    @property
    def verdict(self) -> str:
        return self.comparison.verdict

    def to_json(self, label_a: str | None = None, label_b: str | None = None, with_totals: bool = True) -> dict:
        """The comparison's document (--json, the catalog's summary): report.document, labelled A and B."""
        totals = self.totals if with_totals else None
        return report.document(self.comparison, label_a or self.a.where, label_b or self.b.where, totals)

    def exit_code(self, expect: str | None = None) -> int:
        """0 when B reproduced A (with expect: when the verdict is that one, aliases allowed), else 10."""
        from cloudvault.repro.compare import ALIASES, PASSING

        if expect:
            return errors.OK if self.verdict == ALIASES.get(expect, expect) else errors.REPRO_MISMATCH
        return errors.OK if self.verdict in PASSING else errors.REPRO_MISMATCH


@dataclass(frozen=True)
class CompareOptions:
    """What `vault compare` was asked: RUN_A, RUN_B and the baselines as the user named them, the recipe whose
    rules to use (None: RUN_A's entry's), the folder for the report (None: nothing written)."""

    run_a: str
    run_b: str
    baselines: tuple[str, ...] = ()
    recipe: str | None = None
    out: str | None = None


def compare_named_runs(options: CompareOptions, connect: Callable[..., sqlite3.Connection | None]) -> Judged:
    """`vault compare`: the runs named resolved (connect(): the catalog, opened only when one names an entry or a
    run id; connect(optional=True): None without one), B judged against A by the rules of the recipe, and the
    report written into options.out when it names a folder (never inside a mirror, never over a comparison)."""
    from cloudvault.repro import compare, sources

    a = sources.resolve(options.run_a, connect)
    b = sources.resolve(options.run_b, connect)
    baselines = tuple(sources.resolve(text, connect) for text in options.baselines)
    compare.check_baselines(a, b, baselines)
    judged = judge(a, b, compare_config(options.recipe, a), baselines=baselines)
    if options.out:
        from cloudvault.catalog.mirror_guard import refuse_write_into_mirror

        refuse_write_into_mirror(connect(optional=True), options.out, "compare --out")
        write_compared(Path(options.out), judged)
    return judged


def compare_config(name: str | None, a: Results) -> CompareConfig:
    """The compare rules, the settings compared, the near-tie margin and the timing noise floors: recipe name's,
    else RUN_A's entry's recipe's, else the defaults."""
    from cloudvault.repro import sources
    from cloudvault.repro.compare import DEFAULT_NEAR_TIE, DEFAULT_RULES
    from cloudvault.repro.recipe import load

    recipe = load(name) if name else None
    if recipe is None and a.entry:
        recipe = next((r for r in sources.recipes_for(a.entry) if r.kind == "harness"), None)
    if recipe is None:
        return CompareConfig(dict(DEFAULT_RULES), None, DEFAULT_NEAR_TIE, {})
    return CompareConfig(*recipe.compare_config(), recipe.noise_floors())


def write_compared(out: Path, judged: Judged) -> None:
    """`vault compare --out`: compare.csv, REPORT.md and timings.png in a new or empty folder."""
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


def judge(a: Results, b: Results, config: CompareConfig, *, baselines: tuple[Results, ...] = (),
          more_noise: tuple[dict, ...] = (), settings: tuple[dict, dict] | None = None) -> Judged:  # fmt: skip
    """B judged against A by config. The timing noise is measured over A, the baselines (runs of A's kind, each
    with its settings checked against A's) and more_noise (rows of runs known to be of A's kind: a recipe's recorded
    repetitions, a --repeat batch's earlier runs). settings: A's and B's settings as the caller knows them (a
    repro run's, with what its runner said it ran on), always compared; else each run's own, when both have some."""
    ours, theirs = settings if settings is not None else (a.settings, b.settings)
    diff = settings_differences(ours, theirs, config.settings) if settings is not None or (ours and theirs) else []
    diff += [d for r in baselines if ours and r.settings
             for d in baseline_differences(ours, r.settings, r.where, config.settings)]  # fmt: skip
    cmp = compare_runs(a.rows, b.rows, config.rules, settings_diff=diff, near_tie_margin=config.near_tie,
                       baselines=[*(r.rows for r in baselines), *more_noise], floors=config.floors)  # fmt: skip
    return Judged(cmp, a, b, tuple(baselines), (a.totals(), b.totals()))


def write_report(folder: Path, cmp: RunComparison, *, title: str, labels: tuple[str, str],
                 totals: tuple[dict, dict] | None, baselines: tuple[str, ...] = (),
                 plotted: tuple[tuple[str, dict], tuple[str, dict]] | None = None) -> None:  # fmt: skip
    """compare.csv, timings.png (plotted: A's and B's label and rows, when there are timings) and REPORT.md in
    folder, each written to a temp name and renamed into place, never over a file that is there."""
    from cloudvault.atomic import write_text

    write_text(folder / "compare.csv", report.compare_csv(cmp), force=False)
    plot = None
    if cmp.timings and plotted is not None:
        (label_a, rows_a), (label_b, rows_b) = plotted
        plot = report.write_plot(cmp, rows_a, rows_b, folder / report.PLOT, label_a, label_b)
    text = report.report_md(cmp, title, labels[0], labels[1], totals, baselines=baselines, plot=plot)
    write_text(folder / "REPORT.md", text, force=False)
