"""A comparison as a document (--json, the catalog's summary), compare.csv and REPORT.md (with timings.png beside
it when matplotlib is installed); the terminal's table is cli/views/compare.py."""

from __future__ import annotations

import csv
import io

from cloudvault.repro import timings as timing
from cloudvault.repro.compare import NOT_COMPARABLE, FileResult, RunComparison

PLOT = "timings.png"
PLOT_HINT = "pip install 'cloudvault[plots]' (matplotlib) and run again for timings.png: per-request TTFT and TPOT"

METRICS = ("ttft_s", "tpot_ms", "e2e_s")
TOTALS = ("requests", "output_tokens", "tokens_per_s", "ttft_mean_s", "ttft_median_s", "tpot_mean_ms",
          "tpot_median_ms", "output_median", "hit_cap")  # fmt: skip


def short(request: str) -> str:
    """'670bf1c4bb02136c067d2341@gpu7' -> '670bf1c4@gpu7'."""
    doc, _, gpu = request.partition("@")
    return f"{doc[:8]}@{gpu}" if gpu else request


def identical_outputs(cmp: RunComparison) -> tuple[int, int]:
    """(requests or files whose outputs are identical, all of them): the same count as the rows say identical."""
    return cmp.counts.get("identical", 0), len(cmp.requests)


def differing(cmp: RunComparison) -> list:
    """The requests or files that are not identical, in order (without making every identical one's result)."""
    if hasattr(cmp.requests, "differing"):
        return cmp.requests.differing()
    return [r for r in cmp.requests if r.verdict != "identical"]


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
        "outputs": {"verdict": "identical" if same == total and total else "diverged", "identical": same,
                    "compared": total, "counts": cmp.counts},
        "timings": timing.as_document(cmp.timings),
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
        header += [f"{m}_a", f"{m}_b", f"{m}_delta"]
    writer.writerow([*header, "notes"])
    for r in cmp.requests:
        line = [r.request, r.verdict, _blank(r.first_divergence), _blank(r.shared_prefix), ";".join(r.failed),
                _blank(r.near_tie)]  # fmt: skip
        for m in METRICS:
            a, b, d, _ = r.deltas.get(m, ("", "", "", None))
            line += [a, b, "" if d == "" else f"{d:+.3f}"]
        writer.writerow([*line, "; ".join(r.notes)])
    return out.getvalue()


def _blank(value: object) -> object:
    return "" if value is None else value


def headline(cmp: RunComparison) -> str:
    """Both axes, with counts that agree with the rows: 'REPRODUCED: outputs 5/5 identical; timings within noise
    (TPOT x1.08, 95% CI 0.97-1.21)'."""
    same, total = identical_outputs(cmp)
    files = bool(cmp.requests) and isinstance(cmp.requests[0], FileResult)
    text = f"{cmp.verdict}: outputs {same}/{total}{' files' if files else ''} identical"
    at_token = [r for r in differing(cmp) if getattr(r, "first_divergence", None) is not None]  # files: none
    diverged = [r for r in at_token if r.verdict == "diverged"]
    for r in diverged[:5]:
        name = getattr(r, "request", None) or r.name
        unit = "byte" if isinstance(r, FileResult) else "output token"
        tie = {True: " (near-tie flip)", False: " (not a near tie)"}.get(getattr(r, "near_tie", None), "")
        text += f"; {short(name)} diverged at {unit} {r.first_divergence:,}{tie}"
    if files:
        return text
    if cmp.verdict == NOT_COMPARABLE:
        return f"{text}; timings not judged (not comparable)"
    return f"{text}; {timing.summary(cmp.timings)}"


def report_md(cmp: RunComparison, title: str, label_a: str, label_b: str, totals: tuple[dict, dict] | None,
              *, baselines: tuple[str, ...] = (), plot: bool | None = None) -> str:  # fmt: skip
    """The report; plot True: timings.png was written beside it, False: say how to get it, None: no timings."""
    lines = [f"# {title}", "", f"- A (reference): `{label_a}`", f"- B: `{label_b}`"]
    lines += [f"- baseline (noise): `{b}`" for b in baselines]
    lines += ["", f"**{headline(cmp)}**", ""]
    lines += [f"- {reason}" for reason in cmp.reasons]
    lines += [f"- not checked: {c} (not recorded on one side)" for c in cmp.unchecked]
    if cmp.timings and any(t.ratio is not None for t in cmp.timings.values()):
        lines += ["", "## Timings (measured requests; noise from the runs of A's kind, docs/repro.md)", "",
                  "| metric | median A | median B | B/A | 95% CI | noise | runs | verdict |",
                  "|---|---:|---:|---:|---|---:|---:|---|"]  # fmt: skip
        for t in cmp.timings.values():
            if t.ratio is None:
                continue
            note = f" ({t.note})" if t.note else ""
            lines.append(f"| {t.label} | {t.median_a:.4g} | {t.median_b:.4g} | {t.ratio:.3f} | {t.ci[0]:.3f}-"
                         f"{t.ci[1]:.3f} | +-{t.noise:.0%} | {t.runs} | {t.verdict}{note} |")
        lines += ["", f"![per-request TTFT and TPOT of A and B]({PLOT})" if plot else f"No picture: {PLOT_HINT}."]
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


def write_plot(cmp: RunComparison, a_rows: dict, b_rows: dict, path, label_a: str = "A", label_b: str = "B") -> bool:
    """Per-request TTFT and TPOT of the measured requests, A and B side by side, as a PNG; False without
    matplotlib (REPORT.md then says how to get it). Written under a temp name and renamed into place."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    from cloudvault.atomic import atomic_write

    keys = sorted(set(timing.measured(a_rows)) & set(timing.measured(b_rows)))
    if not keys:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), dpi=100)
    width = 0.4
    for ax, metric in zip(axes, ("ttft", "tpot"), strict=True):
        a = [timing.value(a_rows[k], metric) or 0 for k in keys]
        b = [timing.value(b_rows[k], metric) or 0 for k in keys]
        xs = range(len(keys))
        ax.bar([x - width / 2 for x in xs], a, width, label=f"A {label_a}"[:40])
        ax.bar([x + width / 2 for x in xs], b, width, label=f"B {label_b}"[:40])
        t = cmp.timings.get(metric)
        title = timing.METRICS[metric][1] + (" (" + timing.METRICS[metric][0].split("_")[1] + ")")
        ax.set_title(f"{title}: {t.describe()}, {t.verdict}" if t and t.ratio else title, fontsize=9)
        ax.set_xticks(list(xs), [short(k) for k in keys], rotation=60, fontsize=7)
        ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_write(path, mode=0o644) as fh:
        fig.savefig(fh, format="png", metadata={"Software": None})
    plt.close(fig)
    return True
