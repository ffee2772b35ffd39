"""Per-request timings and run totals, computed with the lab's own formulas (dashboard 3.4.2.5, 3.5).

TTFT = t_first - t_start; TPOT = (t_done - t_first) / (out - 1); E2E = t_done - t_start. Totals are over the
measured requests: output tokens, tok/s = sum(out) / sum(E2E) (not a mean of rates), TTFT and TPOT mean/median,
output median and how many requests hit the output cap. Pure functions: no file is read here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping

import numpy as np


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


def run_totals(out, e2e, ttft, tpot, hits: int) -> dict:
    """totals from the columns of the measured requests: lists, or a run kept as columns' float arrays (summed in
    the same order, so that both give the same totals to the last bit)."""
    seconds, tokens = _sum(e2e), int(_sum(out))
    return {
        "requests": len(out),
        "output_tokens": tokens,
        "tokens_per_s": round(tokens / seconds, 2) if seconds else 0.0,
        "ttft_mean_s": round(math.fsum(ttft) / len(ttft), 2) if len(ttft) else 0.0,
        "ttft_median_s": round(_median(ttft), 2) if len(ttft) else 0.0,
        "tpot_mean_ms": round(math.fsum(tpot) / len(tpot), 2) if len(tpot) else 0.0,
        "tpot_median_ms": round(_median(tpot), 2) if len(tpot) else 0.0,
        "output_median": int(_median(out)) if len(out) else 0,
        "hit_cap": hits,
    }


def _sum(values) -> float:
    """sum() of the values, left to right, a slice at a time (no list of a whole column)."""
    total = 0
    for start in range(0, len(values), 65536):
        part = values[start : start + 65536]
        total = sum(part.tolist() if hasattr(part, "tolist") else part, total)
    return total


def _median(values) -> float:
    return statistics.median(values) if isinstance(values, list) else float(np.median(values))
