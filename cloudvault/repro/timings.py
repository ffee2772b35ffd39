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
pass --repeat or --baseline"), never a changed timing. Pure functions: rows in, judgments out.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections import namedtuple
from collections.abc import Iterable, Iterator, Mapping, Sequence

# metric -> (row column, label, True when a larger value is slower)
METRICS = {"ttft": ("ttft_s", "TTFT", True), "tpot": ("tpot_ms", "TPOT", True), "e2e": ("e2e_s", "E2E", True),
           "throughput": ("tps", "throughput", False)}  # fmt: skip
DEFAULT_FLOOR = 0.05
K = 3.0  # prediction-interval width in run-to-run standard deviations (docs/repro.md: how it was chosen)
RESAMPLES = 2000
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


def paired_values(a: Mapping, b: Mapping, metric: str) -> tuple[list[float], list[float]]:
    """The metric's values of the measured requests both runs have, positive ones only, in the same order."""
    xs, ys = [], []
    for key in sorted(set(measured(a)) & set(measured(b))):
        x, y = value(a[key], metric), value(b[key], metric)
        if x is not None and y is not None and x > 0 and y > 0:
            xs.append(x)
            ys.append(y)
    return xs, ys


def resample_indices(n: int, seed: int) -> Iterator[list[int]]:
    """RESAMPLES lists of n indices drawn with replacement: exactly the draws of Random(seed).randrange(n), n at a
    time, taken from getrandbits as randrange does (rejecting values >= n) without its per-call checks."""
    bits, k = random.Random(seed).getrandbits, n.bit_length()
    for _ in range(RESAMPLES):
        picks = []
        for _ in range(n):
            r = bits(k)
            while r >= n:
                r = bits(k)
            picks.append(r)
        yield picks


@functools.lru_cache(maxsize=8)
def _kept_indices(n: int, seed: int) -> tuple[list[int], ...]:
    return tuple(resample_indices(n, seed))


def resamples(n: int, seed: int) -> Iterable[list[int]]:
    """resample_indices, kept for small n (a comparison draws the same indices for each metric it judges, and
    every comparison uses seed 0): at most 2,000 x 256 indices are kept per (n, seed)."""
    return _kept_indices(n, seed) if n <= 256 else resample_indices(n, seed)


def median_sorted(values: list[float]) -> float:
    """statistics.median of a list already sorted."""
    half = len(values) // 2
    return values[half] if len(values) % 2 else (values[half - 1] + values[half]) / 2


def bootstrap_ratio(xs: Sequence[float], ys: Sequence[float], *, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """median(ys) / median(xs) and its percentile-bootstrap interval, resampling request pairs (seeded: a
    comparison says the same thing every time it is made)."""
    ratio = statistics.median(ys) / statistics.median(xs)
    if len(xs) < 2:
        return ratio, (ratio, ratio)
    found = sorted(median_sorted(sorted([ys[i] for i in picks])) / median_sorted(sorted([xs[i] for i in picks]))
                   for picks in resamples(len(xs), seed))  # fmt: skip
    tail = (1 - CONFIDENCE) / 2
    return ratio, (found[int(tail * (RESAMPLES - 1))], found[int((1 - tail) * (RESAMPLES - 1))])


def run_medians(runs: Sequence[Mapping], keys: set[str], metric: str) -> list[float]:
    """Each run's median of the metric over the given requests (those measured in A and B)."""
    medians = []
    for rows in runs:
        values = [v for k in keys if k in rows and (v := value(rows[k], metric)) is not None and v > 0]
        if values:
            medians.append(statistics.median(values))
    return medians


def noise_band(medians: Sequence[float], floor: float) -> tuple[float, float | None]:
    """(the band as a fraction, the mean log median) from the medians of the runs of A's kind; with fewer than two
    runs the band is the floor and there is no centre."""
    if len(medians) < 2:
        return floor, None
    logs = [math.log(m) for m in medians]
    spread = statistics.stdev(logs) * math.sqrt(1 + 1 / len(logs))
    return max(floor, math.exp(K * spread) - 1), statistics.fmean(logs)


def judge_metric(a: Mapping, b: Mapping, baselines: Sequence[Mapping], metric: str, floor: float = DEFAULT_FLOOR,
                 *, seed: int = 0) -> MetricTiming:  # fmt: skip
    xs, ys = paired_values(a, b, metric)
    if not xs:
        return MetricTiming(metric, INCONCLUSIVE, None, None, None, 1 + len(baselines), None, None, 0,
                            "not recorded for measured requests on both sides")  # fmt: skip
    ratio, ci = bootstrap_ratio(xs, ys, seed=seed)
    keys = set(measured(a)) & set(measured(b))
    medians = run_medians([a, *baselines], keys, metric)
    band, centre = noise_band(medians, floor)
    slower_if_up = METRICS[metric][2]
    med_a, med_b = statistics.median(xs), statistics.median(ys)
    inside_floor = abs(math.log(ratio)) <= math.log(1 + floor)
    if centre is None:
        verdict = WITHIN_NOISE if inside_floor else INCONCLUSIVE
        note = "" if inside_floor else NO_REPETITION
    else:
        shift = math.log(med_b) - centre  # B against the runs of A's kind
        limit = math.log(1 + band)
        if abs(shift) <= limit or inside_floor:
            verdict, note = WITHIN_NOISE, ""
        elif (shift > 0 and ci[0] > 1) or (shift < 0 and ci[1] < 1):
            verdict = SLOWER if (shift > 0) == slower_if_up else FASTER
            note = ""
        else:
            verdict, note = INCONCLUSIVE, "beyond noise, but the interval holds 1 (not significant)"
    return MetricTiming(metric, verdict, ratio, ci, band, len(medians), med_a, med_b, len(xs), note)


def judge(a: Mapping, b: Mapping, baselines: Sequence[Mapping] = (), floors: Mapping[str, float] | None = None,
          *, seed: int = 0) -> dict[str, MetricTiming]:  # fmt: skip
    """Every metric of B against A, noise from A and its baselines (rows of more runs of A's kind)."""
    floors = floors or {}
    return {m: judge_metric(a, b, baselines, m, float(floors.get(m, DEFAULT_FLOOR)), seed=seed) for m in METRICS}


def changed(timings: Mapping[str, MetricTiming]) -> list[MetricTiming]:
    """The metrics slower or faster beyond noise."""
    return [t for t in timings.values() if t.verdict in (SLOWER, FASTER)]


def summary(timings: Mapping[str, MetricTiming]) -> str:
    """The timing half of a headline: 'timings within noise (TPOT x1.08, 95% CI 0.97-1.21)',
    'timings changed: TPOT slower x1.60 (95% CI 1.55-1.66, noise +-12%)', or inconclusive with why."""
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
    return f"timings within noise ({lead.describe()})"


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
    return None if v is None else round(v, digits)
