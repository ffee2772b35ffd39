"""A comparison as a document (--json, the catalog's summary), compare.csv, REPORT.md and a terminal table."""

from __future__ import annotations

import csv
import io

from cloudvault.repro.compare import FileResult, RunComparison

METRICS = ("ttft_s", "tpot_ms", "e2e_s")
TOTALS = ("requests", "output_tokens", "tokens_per_s", "ttft_mean_s", "ttft_median_s", "tpot_mean_ms",
          "tpot_median_ms", "output_median", "hit_cap")  # fmt: skip


def short(request: str) -> str:
    """'670bf1c4bb02136c067d2341@gpu7' -> '670bf1c4@gpu7'."""
    doc, _, gpu = request.partition("@")
    return f"{doc[:8]}@{gpu}" if gpu else request


def identical_outputs(cmp: RunComparison) -> tuple[int, int]:
    """(requests whose outputs are identical under the exact rules, requests compared)."""
    compared = [r for r in cmp.requests if r.verdict not in ("missing", "extra")]
    if compared and isinstance(compared[0], FileResult):
        return sum(1 for r in compared if r.verdict == "identical"), len(cmp.requests)
    return sum(1 for r in compared if not r.failed), len(cmp.requests)


def document(cmp: RunComparison, label_a: str, label_b: str, totals: tuple[dict, dict] | None = None) -> dict:
    same, total = identical_outputs(cmp)
    doc = {
        "a": label_a,
        "b": label_b,
        "verdict": cmp.verdict,
        "reasons": cmp.reasons,
        "counts": cmp.counts,
        "identical": same,
        "compared": total,
        "settings_diff": [list(d) for d in cmp.settings_diff],
        "unchecked": cmp.unchecked,
        "tolerances": {c: {"within": i, "compared": n, "holds": h} for c, (i, n, h) in cmp.tolerances.items()},
    }
    doc["requests"] = [_request_doc(r) for r in cmp.requests]
    if totals is not None:
        doc["totals"] = {"a": totals[0], "b": totals[1]}
    return doc


def _request_doc(r) -> dict:
    if isinstance(r, FileResult):
        return r._asdict()
    return {
        "request": r.request,
        "verdict": r.verdict,
        "first_divergence": r.first_divergence,
        "shared_prefix": r.shared_prefix,
        "failed": r.failed,
        "near_tie": r.near_tie,
        "notes": r.notes,
        "deltas": {c: {"a": a, "b": b, "delta": round(d, 4), "within": w} for c, (a, b, d, w) in r.deltas.items()},
    }


def requests_for_catalog(cmp: RunComparison) -> list[tuple[str, str, int | None, dict]]:
    rows = []
    for r in cmp.requests:
        doc = _request_doc(r)
        name = doc.pop("request", None) or doc.pop("name")
        index = r.first_difference if isinstance(r, FileResult) else doc.pop("first_divergence")
        rows.append((name, doc.pop("verdict"), index, doc))
    return rows


def compare_csv(cmp: RunComparison) -> str:
    out = io.StringIO()
    if cmp.requests and isinstance(cmp.requests[0], FileResult):
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(FileResult._fields)
        writer.writerows(cmp.requests)
        return out.getvalue()
    writer = csv.writer(out, lineterminator="\n")
    header = ["request", "verdict", "first_divergence", "shared_prefix", "failed", "near_tie"]
    for m in METRICS:
        header += [f"{m}_a", f"{m}_b", f"{m}_delta", f"{m}_within"]
    writer.writerow([*header, "notes"])
    for r in cmp.requests:
        line = [r.request, r.verdict, _blank(r.first_divergence), _blank(r.shared_prefix), ";".join(r.failed),
                _blank(r.near_tie)]  # fmt: skip
        for m in METRICS:
            a, b, d, w = r.deltas.get(m, ("", "", "", ""))
            line += [a, b, "" if d == "" else f"{d:+.3f}", w]
        writer.writerow([*line, "; ".join(r.notes)])
    return out.getvalue()


def _blank(value: object) -> object:
    return "" if value is None else value


def headline(cmp: RunComparison) -> str:
    same, total = identical_outputs(cmp)
    what = "files" if cmp.requests and isinstance(cmp.requests[0], FileResult) else "requests"
    text = f"{cmp.verdict}: {same}/{total} {what} identical"
    diverged = [r for r in cmp.requests if getattr(r, "first_divergence", None) is not None and r.verdict == "diverged"]
    for r in diverged[:5]:
        name = getattr(r, "request", None) or r.name
        unit = "byte" if isinstance(r, FileResult) else "output token"
        tie = {True: " (near-tie flip)", False: " (not a near tie)"}.get(getattr(r, "near_tie", None), "")
        text += f"; {short(name)} diverged at {unit} {r.first_divergence:,}{tie}"
    return text


def report_md(cmp: RunComparison, title: str, label_a: str, label_b: str, totals: tuple[dict, dict] | None) -> str:
    lines = [f"# {title}", "", f"- A (reference): `{label_a}`", f"- B: `{label_b}`", "", f"**{headline(cmp)}**", ""]
    lines += [f"- {reason}" for reason in cmp.reasons]
    lines += [f"- not checked: {c} (not recorded on one side)" for c in cmp.unchecked]
    if totals is not None:
        lines += [
            "",
            "## Totals (measured requests, recomputed)",
            "",
            "| total | A | B | B - A |",
            "|---|---:|---:|---:|",
        ]
        lines += [f"| {k} | {totals[0].get(k)} | {totals[1].get(k)} | {_change(totals[0].get(k), totals[1].get(k))} |"
                  for k in TOTALS]  # fmt: skip
    lines += ["", "## Per request", "", "```", compare_csv(cmp).rstrip(), "```", ""]
    return "\n".join(lines)


def _change(a: float | None, b: float | None) -> str:
    """'+1.23 (+0.5%)', '0' or '' when a side is missing."""
    if a is None or b is None:
        return ""
    delta = b - a
    if delta == 0:
        return "0"
    pct = f" ({delta / a * 100:+.1f}%)" if a else ""
    return f"{delta:+.2f}{pct}" if isinstance(delta, float) else f"{delta:+d}{pct}"


def reason_lines(cmp: RunComparison) -> list[str]:
    """What the headline's verdict rests on, one indented line each: what differs, what could not be checked."""
    return [f"  {reason}" for reason in cmp.reasons] + [
        f"  not checked: {column} (not recorded on one side)" for column in cmp.unchecked
    ]


def print_table(cmp: RunComparison, *, all_rows: bool = False) -> None:
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
    shown = sorted(cmp.requests, key=lambda r: r.verdict == "identical")
    for r in shown if all_rows else [r for r in shown if r.verdict != "identical"]:
        table.add_row(*(_cells_file(r) if files else _cells(r)))
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 130, highlight=False)
    if table.row_count:
        console.print(table)


def _cells(r) -> list[str]:
    deltas = [f"{r.deltas[m][2]:+.2f}" + ("" if r.deltas[m][3] else " !") if m in r.deltas else "" for m in METRICS]
    tie = {True: "near-tie flip", False: "not a near tie"}.get(r.near_tie, "")
    note = "; ".join(filter(None, [", ".join(r.failed) and f"differs: {', '.join(r.failed)}", tie, *r.notes]))
    first = "" if r.first_divergence is None else f"{r.first_divergence:,}"
    prefix = "" if r.shared_prefix is None else f"{r.shared_prefix:,}"
    return [short(r.request), r.verdict, first, prefix, *deltas, note]


def _cells_file(r: FileResult) -> list[str]:
    first = "" if r.first_difference is None else str(r.first_difference)
    return [r.name, r.verdict, first, str(r.size_a), str(r.size_b)]
