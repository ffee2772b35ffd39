"""Per-request timings and run totals, computed with the lab's own formulas (dashboard 3.4.2.5, 3.5).

TTFT = t_first - t_start; TPOT = (t_done - t_first) / (out - 1); E2E = t_done - t_start. Totals are over the
measured requests: output tokens, tok/s = sum(out) / sum(E2E) (not a mean of rates), TTFT and TPOT mean/median,
output median and how many requests hit the output cap. Pure functions: no file is read here.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping


def request_timings(t_start: float, t_first: float, t_done: float, out: int) -> dict[str, float]:
    """ttft_s, tpot_ms and e2e_s of one request from its three timestamps (seconds) and output length."""
    tpot = (t_done - t_first) / (out - 1) * 1000 if out > 1 else 0.0
    return {"ttft_s": t_first - t_start, "tpot_ms": tpot, "e2e_s": t_done - t_start}


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0..100) by linear interpolation between the closest ranks."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def totals(rows: Iterable[Mapping], *, cap: int | None = None) -> dict[str, float | int]:
    """The run's totals over rows with output_tokens, ttft_s, tpot_ms, e2e_s (and finish: 'cap' counts a cap hit;
    without finish, a request whose output reached cap does)."""
    rows = list(rows)
    out = [int(r["output_tokens"]) for r in rows]
    hits = sum(1 for r, n in zip(rows, out, strict=True) if r.get("finish") == "cap" or (cap and n >= cap))
    return run_totals(out, [float(r["e2e_s"]) for r in rows], [float(r["ttft_s"]) for r in rows],
                      [float(r["tpot_ms"]) for r in rows], hits)  # fmt: skip


def run_totals(out: list[int], e2e: list[float], ttft: list[float], tpot: list[float], hits: int) -> dict:
    """totals from the columns of the measured requests (a run kept as columns passes them as they are)."""
    seconds = sum(e2e)
    return {
        "requests": len(out),
        "output_tokens": sum(out),
        "tokens_per_s": round(sum(out) / seconds, 2) if seconds else 0.0,
        "ttft_mean_s": round(statistics.fmean(ttft), 2) if ttft else 0.0,
        "ttft_median_s": round(statistics.median(ttft), 2) if ttft else 0.0,
        "tpot_mean_ms": round(statistics.fmean(tpot), 2) if tpot else 0.0,
        "tpot_median_ms": round(statistics.median(tpot), 2) if tpot else 0.0,
        "output_median": int(statistics.median(out)) if out else 0,
        "hit_cap": hits,
    }
