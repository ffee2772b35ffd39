"""`vault compare` and `vault repro` on a terminal: a comparison's headline, what it rests on, and the table of
the requests (or files) that differ, drawn by rich."""

from __future__ import annotations

from cloudvault.repro.compare import FileResult
from cloudvault.repro.report import METRICS, differing, headline, reason_lines, short


def show(ui, cmp, *, all_rows: bool = False) -> None:
    """The headline, one line per reason, then the table (identical rows only with all_rows)."""
    ui.heading(headline(cmp))
    for line in reason_lines(cmp):
        ui.line(line)
    print_table(cmp, all_rows=all_rows)


def show_totals(ui, totals) -> None:
    """The measured totals of A and B on one line."""
    a, b = totals
    ui.line(f"totals (measured): A {a['output_tokens']:,} tok, {a['tokens_per_s']} tok/s, TTFT {a['ttft_mean_s']}/"
            f"{a['ttft_median_s']} s, TPOT {a['tpot_mean_ms']}/{a['tpot_median_ms']} ms, {a['hit_cap']} at cap; "
            f"B {b['output_tokens']:,} tok, {b['tokens_per_s']} tok/s, TTFT {b['ttft_mean_s']}/{b['ttft_median_s']} s, "
            f"TPOT {b['tpot_mean_ms']}/{b['tpot_median_ms']} ms, {b['hit_cap']} at cap")  # fmt: skip


def print_table(cmp, *, all_rows: bool = False) -> None:
    """The per-request table on the terminal (rich), the non-identical rows first; identical ones only with all."""
    import sys

    from rich.console import Console
    from rich.table import Table

    files = bool(cmp.requests) and isinstance(cmp.requests[0], FileResult)
    table = Table(box=None, pad_edge=False)
    columns = (
        ("file", "verdict", "first diff byte", "size A", "size B")
        if files
        else ("request", "verdict", "first divergence", "shared prefix", "Δ TTFT s", "Δ TPOT ms", "Δ E2E s", "note")
    )
    for column in columns:
        table.add_column(column)
    shown = differing(cmp)
    if all_rows:
        shown += [r for r in cmp.requests if r.verdict == "identical"]
    for r in shown:
        table.add_row(*(_cells_file(r) if files else _cells(r)))
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 130, highlight=False)
    if table.row_count:
        console.print(table)


def _cells(r) -> list[str]:
    deltas = [f"{r.deltas[m][2]:+.2f}" + (" !" if r.deltas[m][3] is False else "") if m in r.deltas else ""
              for m in METRICS]  # fmt: skip
    tie = {True: "near-tie flip", False: "not a near tie"}.get(r.near_tie, "")
    note = "; ".join(filter(None, [", ".join(r.failed) and f"differs: {', '.join(r.failed)}", tie, *r.notes]))
    first = "" if r.first_divergence is None else f"{r.first_divergence:,}"
    prefix = "" if r.shared_prefix is None else f"{r.shared_prefix:,}"
    return [short(r.request), r.verdict, first, prefix, *deltas, note]


def _cells_file(r) -> list[str]:
    first = "" if r.first_difference is None else str(r.first_difference)
    return [r.name, r.verdict, first, str(r.size_a), str(r.size_b)]


def show_judged(ui, judged, *, all_rows: bool = False) -> None:
    """`vault compare`: the runs compared (A, B, the baselines), the comparison, the measured totals."""
    ui.line(f"A {judged.a.where}")
    ui.line(f"B {judged.b.where}")
    for r in judged.baselines:
        ui.line(f"  baseline {r.where}")
    show(ui, judged.comparison, all_rows=all_rows)
    show_totals(ui, judged.totals)
