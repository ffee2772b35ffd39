"""Timings judged against measured noise: per metric (TTFT, TPOT, E2E, throughput), is run B slower or faster than
run A beyond the run-to-run spread of A's kind, and by how much?

Only measured requests count (role = warmup is never judged), and only those both runs have. By how much: the ratio
of medians B/A with a 95% confidence interval from a paired bootstrap over the requests (the same requests are
drawn for A and B, so a long prompt's slow request does not widen the interval). Is it different: noise is learned
from repetitions, the runs of A's kind (A and its baselines, the same experiment on the same hardware): the spread
s of their medians (standard deviation of the log medians). B's median is beyond noise when its log lies more than
K * s * sqrt(1 + 1/n) from the mean log median of those n runs (a prediction interval for one more run, K = 3),
and never within the recipe's floor (`noise = 0.05`: 5%). A metric is `slower` or `faster` only when it is both
beyond noise and significant (the interval excludes 1); beyond noise but not significant is `inconclusive`. With
no repetition (n = 1) there is no measured noise: a difference beyond the floor is `inconclusive` ("one run each;
pass --repeat or --baseline"), never a changed timing. The noise is computed in logs (no overflow, whatever the
times), the bootstrap with numpy: Python's own draws up to EXACT_DRAWS requests, a windowed scheme of the same
distribution beyond (a serving benchmark's 300,000 requests). Pure functions: rows in, judgments out.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import namedtuple
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

# metric -> (row column, label, True when a larger value is slower)
METRICS = {"ttft": ("ttft_s", "TTFT", True), "tpot": ("tpot_ms", "TPOT", True), "e2e": ("e2e_s", "E2E", True),
           "throughput": ("tps", "throughput", False)}  # fmt: skip
DEFAULT_FLOOR = 0.05
K = 3.0  # prediction-interval width in run-to-run standard deviations (docs/repro.md: how it was chosen)
RESAMPLES = 2000
EXACT_DRAWS = 1000  # up to this many request pairs, the bootstrap draws exactly what Python's random module draws
WINDOW = 3.0  # beyond: the windowed bootstrap's half-width around the middle rank, in sqrt(n) (6 standard deviations)
CONFIDENCE = 0.95
NO_REPETITION = "one run each; pass --repeat or --baseline"

WITHIN_NOISE, SLOWER, FASTER, INCONCLUSIVE = "within_noise", "slower", "faster", "inconclusive"


class MetricTiming(
    namedtuple("MetricTiming", "metric verdict ratio ci noise runs median_a median_b requests note")
):
    """One metric: verdict, ratio of medians B/A, its (low, high) interval, the noise band (a fraction: 0.12 is
    +-12%), how many runs of A's kind measured the noise, the medians, how many requests were judged, a note."""

    __slots__ = ()

    @property
    def label(self) -> str:
        return METRICS[self.metric][1]

    def describe(self) -> str:
        """'TPOT x1.08, 95% CI 0.97-1.21' (a throughput ratio below 1 is slower)."""
        if self.ratio is None:
            return f"{self.label} not measured"
        return f"{self.label} x{self.ratio:.2f}, 95% CI {self.ci[0]:.2f}-{self.ci[1]:.2f}"


def measured(rows: Mapping[str, Mapping]) -> dict[str, Mapping]:
    """The requests a timing is judged over: role measured (a row without a role is measured)."""
    return {k: r for k, r in rows.items() if (r.get("role") or "measured") == "measured"}


def measured_keys(rows: Mapping[str, Mapping]) -> list[str]:
    """The keys of measured(rows); a run kept as columns answers from its role column."""
    return rows.measured_keys() if hasattr(rows, "measured_keys") else list(measured(rows))


def value(row: Mapping, metric: str) -> float | None:
    """One request's value of a metric; throughput is output tokens over E2E when tps is not recorded."""
    column = METRICS[metric][0]
    raw = row.get(column)
    if raw in (None, "") and metric == "throughput":
        out, e2e = row.get("output_tokens"), row.get("e2e_s")
        if out not in (None, "") and e2e not in (None, "") and float(e2e) > 0:
            return float(out) / float(e2e)
        return None
    try:
        number = float(raw)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def shared_measured(a: Mapping, b: Mapping) -> list[str]:
    """The measured requests both runs have, in key order (the order the bootstrap draws them in)."""
    keys = measured_keys(a)
    return sorted(k for k, both in zip(keys, measured_in(b, keys), strict=True) if both)


def measured_in(rows: Mapping, keys: Sequence[str]) -> np.ndarray:
    """Per key: the run has that request, measured."""
    if hasattr(rows, "positions"):
        at = rows.positions(keys)
        return (at >= 0) & rows.measured_mask()[np.maximum(at, 0)] if len(rows) else np.zeros(len(keys), bool)
    kept = measured(rows)
    return np.fromiter((k in kept for k in keys), bool, len(keys))


def metric_values(rows: Mapping, keys: Sequence[str], metric: str, *, measured_only: bool = False) -> np.ndarray:
    """The metric's value of each request in keys (NaN where the run lacks it, or it is not measured and
    measured_only); a run kept as columns (results.RequestTable) answers from its arrays."""
    if hasattr(rows, "metric_values"):
        return rows.metric_values(keys, metric, measured_only=measured_only)
    found = np.full(len(keys), np.nan)
    for i, key in enumerate(keys):
        row = rows.get(key)
        if row is not None and not (measured_only and (row.get("role") or "measured") != "measured"):
            v = value(row, metric)
            found[i] = np.nan if v is None else v
    return found


def _python_draws(n: int, seed: int, rows: int) -> Iterator[np.ndarray]:
    """Blocks of `rows` resamples (RESAMPLES in all) of n indices: exactly Random(seed).randrange(n), n at a time
    (getrandbits(k) rejecting values >= n), drawn by numpy's MT19937 from the same state."""
    state = random.Random(seed).getstate()[1]
    bits = np.random.MT19937()
    bits.state = {"bit_generator": "MT19937", "state": {"key": np.array(state[:-1], np.uint32), "pos": state[-1]}}
    k, kept = n.bit_length(), np.empty(0, np.int64)
    for start in range(0, RESAMPLES, rows):
        need = min(rows, RESAMPLES - start) * n
        while kept.size < need:
            raw = (bits.random_raw(max(4096, 2 * (need - kept.size))) >> np.uint64(32 - k)).astype(np.int64)
            kept = np.concatenate([kept, raw[raw < n]])
        yield kept[:need].reshape(-1, n)
        kept = kept[need:]


def _exact_ratios(x: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    """median(y[picks]) / median(x[picks]) of each resample, the picks drawn as Python's random draws them."""
    return np.concatenate([np.median(y[p], axis=1) / np.median(x[p], axis=1) for p in _python_draws(len(x), seed, 256)])


def _windowed_ratios(x: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    """The same paired bootstrap for large n in O(sqrt(n)) per resample: a resample's median sits within a few
    sqrt(n) ranks of the middle, so only how often each request near the middle (by x or by y) is drawn matters,
    and how often the rest are, counted by (below or above the middle window) in x and in y. Those counts are drawn
    exactly (binomial, uniform, multinomial); a resample whose median falls outside the window (6 standard
    deviations: probability about 1e-9) is drawn again in full."""
    n, rng = len(x), np.random.default_rng(seed)
    rank_x, rank_y = _ranks(x), _ranks(y)
    middle = ((n - 1) // 2, n // 2)  # the sorted positions a median averages
    half = int(WINDOW * math.sqrt(n)) + 2
    first, last = max(0, middle[0] - half), min(n, middle[1] + half + 1)
    near = ((rank_x >= first) & (rank_x < last)) | ((rank_y >= first) & (rank_y < last))
    special = np.flatnonzero(near)
    cells = np.bincount(2 * (rank_x[~near] < first) + (rank_y[~near] < first), minlength=4)
    # a special request's slot on each side: 0 below the window, 1.. its rank in it, width + 1 above
    slots = [np.clip(r[special] - first + 1, 0, last - first + 1).astype(np.int32) for r in (rank_x, rank_y)]
    sides = ((slots[0], np.sort(x), [2, 3]), (slots[1], np.sort(y), [1, 3]))
    found = []
    for rows in _blocks(RESAMPLES, 100):
        drawn = rng.binomial(n, special.size / n, size=rows)
        picks = rng.integers(0, special.size, size=int(drawn.sum()), dtype=np.int32)
        row_of = np.repeat(np.arange(rows, dtype=np.int32) * (last - first + 2), drawn)
        rest = rng.multinomial(n - drawn, cells / cells.sum()) if cells.sum() else np.zeros((rows, 4), np.int64)
        med_x, med_y = (_side_median(row_of + slot[picks], rest[:, below].sum(1), ordered, (first, last), middle)
                        for slot, ordered, below in sides)  # fmt: skip
        for row in np.flatnonzero(np.isnan(med_x) | np.isnan(med_y)):
            p = rng.integers(0, n, size=n)
            med_x[row], med_y[row] = np.median(x[p]), np.median(y[p])
        found.append(med_y / med_x)
    return np.concatenate(found)


def _side_median(flat, below_rest, ordered, window, middle) -> np.ndarray:
    """Each resample's median on one side (x or y) from its picks among the special requests (flat: resample *
    (width + 2) + slot) and how many picks of the rest lie below the window; NaN where the median's positions fall
    outside the window."""
    first, last = window
    rows, width = below_rest.size, last - first
    counts = np.bincount(flat, minlength=rows * (width + 2)).reshape(rows, width + 2)
    below = below_rest + counts[:, 0]
    reach = below[:, None] + np.cumsum(counts[:, 1:-1], axis=1)
    at = [np.minimum((reach <= p).sum(1), width - 1) for p in middle]
    found = (ordered[first + at[0]] + ordered[first + at[1]]) / 2 if middle[0] != middle[1] else ordered[first + at[0]]
    return np.where((below <= middle[0]) & (reach[:, -1] > middle[1]), found, np.nan)


def _blocks(total: int, size: int) -> Iterator[int]:
    for start in range(0, total, size):
        yield min(size, total - start)


def _ranks(values: np.ndarray) -> np.ndarray:
    """Each value's position in the stably sorted values."""
    ranks = np.empty(len(values), np.int64)
    ranks[np.argsort(values, kind="stable")] = np.arange(len(values))
    return ranks


def bootstrap_ratio(xs: Sequence[float], ys: Sequence[float], *, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """median(ys) / median(xs) and its percentile-bootstrap interval, resampling request pairs (seeded: a
    comparison says the same thing every time it is made). Up to EXACT_DRAWS pairs the draws are Python's
    Random(seed).randrange, draw for draw; beyond, the windowed scheme (the same distribution, O(sqrt(n)))."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    ratio = _quotient(float(np.median(y)), float(np.median(x)))
    if len(x) < 2:
        return ratio, (ratio, ratio)
    with np.errstate(over="ignore", divide="ignore"):  # a ratio past the largest float is inf, never an error
        found = np.sort((_exact_ratios if len(x) <= EXACT_DRAWS else _windowed_ratios)(x, y, seed))
    tail = (1 - CONFIDENCE) / 2
    return ratio, (float(found[int(tail * (RESAMPLES - 1))]), float(found[int((1 - tail) * (RESAMPLES - 1))]))


def _quotient(top: float, bottom: float) -> float:
    """top / bottom, inf where it would overflow (a time of 1e300 over one of 1e-300)."""
    with np.errstate(over="ignore", under="ignore"):
        return float(np.float64(top) / np.float64(bottom))


def _exp(log: float) -> float:
    return math.exp(log) if log < 709 else math.inf


def run_medians(runs: Sequence[Mapping], keys: Sequence[str], metric: str) -> list[float]:
    """Each run's median of the metric over the given requests (those measured in A and B), counting only the
    requests measured in that run too (a baseline's warm-ups are never noise)."""
    medians = []
    for rows in runs:
        values = metric_values(rows, keys, metric, measured_only=True)
        values = values[values > 0]
        if values.size:
            medians.append(float(np.median(values)))
    return medians


def noise_band(medians: Sequence[float], floor: float) -> tuple[float, float | None]:
    """(the band as a fraction, the mean log median) from the medians of the runs of A's kind; with fewer than two
    runs the band is the floor and there is no centre. In logs: a run of 1e300 beside one of 1e-300 is a band of
    inf, not an overflow."""
    if len(medians) < 2:
        return floor, None
    logs = [math.log(m) for m in medians]
    spread = statistics.stdev(logs) * math.sqrt(1 + 1 / len(logs))
    return max(floor, _exp(K * spread) - 1), statistics.fmean(logs)


def judge_metric(a: Mapping, b: Mapping, baselines: Sequence[Mapping], metric: str, floor: float = DEFAULT_FLOOR,
                 *, seed: int = 0, keys: Sequence[str] | None = None) -> MetricTiming:  # fmt: skip
    keys = shared_measured(a, b) if keys is None else keys
    xs, ys = metric_values(a, keys, metric), metric_values(b, keys, metric)
    both = (xs > 0) & (ys > 0)
    xs, ys = xs[both], ys[both]
    if not xs.size:
        return MetricTiming(metric, INCONCLUSIVE, None, None, None, 1 + len(baselines), None, None, 0,
                            "not recorded for measured requests on both sides")  # fmt: skip
    ratio, ci = bootstrap_ratio(xs, ys, seed=seed)
    medians = run_medians([a, *baselines], keys, metric)
    band, centre = noise_band(medians, floor)
    med_a, med_b = float(np.median(xs)), float(np.median(ys))
    moved = math.log(ratio) if 0 < ratio < math.inf else math.log(med_b) - math.log(med_a)
    inside_floor = abs(moved) <= math.log(1 + floor)
    verdict, note = _verdict(moved, inside_floor, centre, math.log(med_b), band, ci, METRICS[metric][2])
    if verdict == WITHIN_NOISE and not inside_floor:
        note = f"within run-to-run noise of +-{band:.0%} over {len(medians)} runs"
    return MetricTiming(metric, verdict, ratio, ci, band, len(medians), med_a, med_b, int(xs.size), note)


def _verdict(moved, inside_floor, centre, log_b, band, ci, slower_if_up) -> tuple[str, str]:
    """The verdict and its note: B's log median against the runs of A's kind (their centre and band)."""
    if centre is None:
        return (WITHIN_NOISE, "") if inside_floor else (INCONCLUSIVE, NO_REPETITION)
    shift = log_b - centre
    if abs(shift) <= math.log(1 + band) or inside_floor:
        return WITHIN_NOISE, ""
    if (shift > 0 and ci[0] > 1) or (shift < 0 and ci[1] < 1):
        return (SLOWER if (shift > 0) == slower_if_up else FASTER), ""
    return INCONCLUSIVE, "beyond noise, but the interval holds 1 (not significant)"


def judge(a: Mapping, b: Mapping, baselines: Sequence[Mapping] = (), floors: Mapping[str, float] | None = None,
          *, seed: int = 0) -> dict[str, MetricTiming]:  # fmt: skip
    """Every metric of B against A, noise from A and its baselines (rows of more runs of A's kind)."""
    floors = floors or {}
    keys = shared_measured(a, b)
    return {m: judge_metric(a, b, baselines, m, float(floors.get(m, DEFAULT_FLOOR)), seed=seed, keys=keys)
            for m in METRICS}  # fmt: skip


def changed(timings: Mapping[str, MetricTiming]) -> list[MetricTiming]:
    """The metrics slower or faster beyond noise."""
    return [t for t in timings.values() if t.verdict in (SLOWER, FASTER)]


def summary(timings: Mapping[str, MetricTiming]) -> str:
    """The timing half of a headline: 'timings within noise (TPOT x1.08, 95% CI 0.97-1.21)', with the noise named
    where it decided ('TPOT x2.13 within run-to-run noise of +-87% over 7 runs, 95% CI ...'), 'timings changed: TPOT
    slower x1.60 (95% CI 1.55-1.66, noise +-12%)', or inconclusive with why."""
    if not timings or all(t.ratio is None for t in timings.values()):
        return "timings not recorded"
    moved = changed(timings)
    if moved:
        return "timings changed: " + "; ".join(
            f"{t.label} {t.verdict} x{t.ratio:.2f} (95% CI {t.ci[0]:.2f}-{t.ci[1]:.2f}, noise +-{t.noise:.0%})"
            for t in moved
        )
    unsure = [t for t in timings.values() if t.verdict == INCONCLUSIVE and t.ratio is not None]
    lead = timings.get("tpot") if timings.get("tpot") and timings["tpot"].ratio is not None else None
    lead = lead or next(t for t in timings.values() if t.ratio is not None)
    if unsure:
        why = sorted({t.note for t in unsure})
        return f"timings inconclusive ({'; '.join(why)}): " + ", ".join(t.describe() for t in unsure)
    text = lead.describe() if not lead.note else (f"{lead.label} x{lead.ratio:.2f} {lead.note}, 95% CI "
                                                  f"{lead.ci[0]:.2f}-{lead.ci[1]:.2f}")  # fmt: skip
    by_noise = [f"{t.label} x{t.ratio:.2f} within +-{t.noise:.0%}" for t in timings.values()
                if t is not lead and t.verdict == WITHIN_NOISE and t.note]  # fmt: skip
    return f"timings within noise ({text}{'; also ' + ', '.join(by_noise) if by_noise else ''})"


def as_document(timings: Mapping[str, MetricTiming]) -> dict:
    """--json's timings: {metric: {verdict, ratio, ci, noise, runs, median_a, median_b, requests, note}}."""
    doc = {}
    for metric, t in timings.items():
        ci = [_round(v) for v in t.ci] if t.ci else None
        doc[metric] = {"verdict": t.verdict, "ratio": _round(t.ratio), "ci": ci,
                       "noise": _round(t.noise), "runs": t.runs, "median_a": _round(t.median_a, 6),
                       "median_b": _round(t.median_b, 6), "requests": t.requests, "note": t.note}  # fmt: skip
    return doc


def _round(v: float | None, digits: int = 4) -> float | None:
    """v rounded; None for none, and for a ratio or band past the largest float (JSON has no inf)."""
    return None if v is None or not math.isfinite(v) else round(v, digits)
