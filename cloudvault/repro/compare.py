"""Compare two runs on two axes, outputs and timings, and give one verdict.

Outputs, per column of the per-request table under the recipe's rules: "exact" (token ids, output length, finish
reason must be equal) or "ignore"; a request is identical or diverged (with its first divergent token), missing or
extra. Timings (TTFT, TPOT, E2E, throughput) are judged over the measured requests by cloudvault.repro.timings,
against the run-to-run noise of A and its baselines; a timing column's rule ("timing", or a legacy {rtol, ...}
table) only says its per-request deltas are shown. Verdicts: NOT_COMPARABLE (settings differ, or nothing in
common), OUTPUTS_DIVERGED, TIMINGS_CHANGED (a metric slower or faster beyond noise), else REPRODUCED. Run A is the
reference (the record), run B the new run. Pure functions: the runs arrive as dicts of rows; nothing reads a file.
"""

from __future__ import annotations

import os
from collections import namedtuple
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from cloudvault.errors import UsageError

EXACT = "exact"
IGNORE = "ignore"
TIMING = "timing"  # a timing column: per-request deltas shown, judged over the run by repro.timings
TOKENS = "output_ids"  # the column holding a request's output token ids
MARGINS = "top2_margin"  # per output token: logprob of the top token minus the runner-up's, when recorded

REPRODUCED = "REPRODUCED"
OUTPUTS_DIVERGED = "OUTPUTS_DIVERGED"
TIMINGS_CHANGED = "TIMINGS_CHANGED"
NOT_COMPARABLE = "NOT_COMPARABLE"
VERDICTS = (REPRODUCED, OUTPUTS_DIVERGED, TIMINGS_CHANGED, NOT_COMPARABLE)
ALIASES = {"DIVERGED": OUTPUTS_DIVERGED}  # --expect DIVERGED (before timings were judged apart) still works
PASSING = (REPRODUCED,)


class BaselineRefused(UsageError):
    """--baseline {baseline} {why}; a baseline is another independent run of A's kind (nothing was compared)"""


class Tolerance(namedtuple("Tolerance", "rtol atol percentile", defaults=(0.0, 0.0, None))):
    """A legacy per-request timing tolerance: |b - a| <= atol + rtol * |a| is shown per request (a "!" in the
    table), never judged; the run's timings are judged against measured noise (repro.timings)."""

    __slots__ = ()

    def holds(self, a: float, b: float) -> bool:
        return abs(b - a) <= self.atol + self.rtol * abs(a) + 1e-12

    def __str__(self) -> str:
        parts = [f"rtol {self.rtol:g}"] if self.rtol else []
        parts += [f"atol {self.atol:g}"] if self.atol else []
        parts += [f"p{self.percentile:g}"] if self.percentile is not None else []
        return " ".join(parts) or "equal"


DEFAULT_RULES = {
    "output_ids": EXACT, "output_tokens": EXACT, "finish": EXACT, "ttft_s": TIMING, "tpot_ms": TIMING,
    "e2e_s": TIMING, "tps": IGNORE,
}  # fmt: skip
DEFAULT_NEAR_TIE = 0.1


class RequestResult(
    namedtuple("RequestResult", "request verdict first_divergence shared_prefix deltas failed near_tie notes")
):
    """One request: verdict (identical | diverged | missing | extra: its outputs), the first divergent output
    token (0-based) and the shared prefix length, per timing column (a, b, b - a, within its legacy tolerance or
    None), the exact rules that failed, near_tie (True/False when logprobs were recorded, None otherwise)."""

    __slots__ = ()


class RunComparison(
    namedtuple("RunComparison", "verdict requests counts timings settings_diff unchecked reasons", defaults=({},))
):
    """The whole comparison: verdict, per-request results, counts by verdict (of outputs), per metric the timing
    judgment (repro.timings.MetricTiming), settings that differ, rules that could not be checked, and why the
    verdict is what it is."""

    __slots__ = ()


def parse_rule(spec: object) -> str | Tolerance:
    """A recipe's rule value: "exact", "ignore", "timing", or a (legacy) table with rtol, atol, percentile."""
    if spec in (EXACT, IGNORE, TIMING):
        return spec
    if isinstance(spec, Mapping) and set(spec) <= {"rtol", "atol", "percentile"} and spec:
        return Tolerance(float(spec.get("rtol", 0.0)), float(spec.get("atol", 0.0)), spec.get("percentile"))
    raise ValueError(f"a rule is 'exact', 'ignore', 'timing' or a table of rtol/atol/percentile, not {spec!r}")


def first_divergence(a: list, b: list) -> int | None:
    """Index of the first differing token; the shorter length when one is a prefix of the other; None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_request(
    key: str, a: Mapping, b: Mapping, rules: Mapping[str, str | Tolerance], near_tie_margin: float = 0.1
) -> RequestResult:
    """One request of run A against the same request of run B."""
    failed, deltas, notes = [], {}, []
    index = shared = None
    for column, rule in rules.items():
        if rule == IGNORE:
            continue
        if a.get(column) is None or b.get(column) is None:
            notes.append(f"{column} not recorded in {'A' if a.get(column) is None else 'B'}")
            continue
        if rule == EXACT:
            if column == TOKENS:
                index = first_divergence(list(a[column]), list(b[column]))
                shared = len(a[column]) if index is None else index
            if _value(a[column]) != _value(b[column]):
                failed.append(column)
            continue
        x, y = float(a[column]), float(b[column])
        deltas[column] = (x, y, y - x, rule.holds(x, y) if isinstance(rule, Tolerance) else None)
    near_tie = _near_tie(a, b, index, near_tie_margin) if TOKENS in failed else None
    verdict = "diverged" if failed else "identical"
    return RequestResult(key, verdict, index, shared, deltas, failed, near_tie, notes)


def _value(value: object) -> object:
    """Exact comparison ignores representation: '8192' equals 8192, a tuple equals a list."""
    if isinstance(value, list | tuple):
        return list(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        return text


def _near_tie(a: Mapping, b: Mapping, index: int | None, threshold: float) -> bool | None:
    """Whether the divergence sits where the top two candidates were within threshold (a greedy flip)."""
    for side in (a, b):
        margins = side.get(MARGINS)
        if margins is not None and index is not None and index < len(margins):
            return float(margins[index]) < threshold
    return None


def compare_runs(
    a_rows: Mapping[str, Mapping], b_rows: Mapping[str, Mapping], rules: Mapping[str, str | Tolerance], *,
    settings_diff: Iterable[tuple[str, object, object]] = (), near_tie_margin: float = 0.1,
    baselines: Sequence[Mapping[str, Mapping]] = (), floors: Mapping[str, float] | None = None,
) -> RunComparison:  # fmt: skip
    """Every request of A against B (outputs), the timings of the measured requests against the noise of A and its
    baselines (more runs of A's kind), and one verdict. settings_diff holds a baseline's differences from A too
    (baseline_differences): a baseline that ran otherwise is NOT_COMPARABLE, as B would be."""
    from cloudvault.repro import timings as timing

    if hasattr(a_rows, "exact_values") and hasattr(b_rows, "exact_values"):
        results, unchecked = _column_results(a_rows, b_rows, rules, near_tie_margin)
        counts = results.counts()
    else:
        results = [compare_request(k, a_rows[k], b_rows[k], rules, near_tie_margin) for k in a_rows if k in b_rows]
        results += [RequestResult(k, "missing", None, None, {}, [], None, ["not in B"]) for k in a_rows
                    if k not in b_rows]  # fmt: skip
        results += [RequestResult(k, "extra", None, None, {}, [], None, ["not in A"]) for k in b_rows
                    if k not in a_rows]  # fmt: skip
        counts = {}
        for r in results:
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
        unchecked = sorted({n.split(" ")[0] for r in results for n in r.notes if "not recorded" in n})
    judged = timing.judge(a_rows, b_rows, baselines, floors)
    verdict, reasons = _verdict(counts, judged, list(settings_diff))
    return RunComparison(verdict, results, counts, judged, list(settings_diff), unchecked, reasons)


class RequestResults(Sequence):
    """The per-request results of two runs kept as columns (columns.RequestTable): verdicts decided over the columns
    at once, each RequestResult made by compare_request when it is read, so that 300,000 requests compare without
    holding 300,000 results."""

    def __init__(self, a, b, rules, margin: float, keys: list[str], verdicts: list[str]) -> None:
        self.a, self.b, self.rules, self.margin, self.keys, self.verdicts = a, b, rules, margin, keys, verdicts

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> RequestResult:
        key, verdict = self.keys[i], self.verdicts[i]
        if verdict in ("missing", "extra"):
            return RequestResult(key, verdict, None, None, {}, [], None, ["not in B" if verdict == "missing" else
                                                                          "not in A"])  # fmt: skip
        return compare_request(key, self.a[key], self.b[key], self.rules, self.margin)

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for v in self.verdicts:
            found[v] = found.get(v, 0) + 1
        return found

    def differing(self) -> list[RequestResult]:
        """The results that are not identical, in order."""
        return [self[i] for i, v in enumerate(self.verdicts) if v != "identical"]


def _column_results(a, b, rules, margin: float) -> tuple[RequestResults, list[str]]:
    """compare_request's verdicts for every request, over the columns of two RequestTables; the columns some pair
    did not record (unchecked)."""
    at_b = b.positions(a.requests)
    both = at_b >= 0
    ia, ib = np.flatnonzero(both), at_b[both]
    failed, unchecked = np.zeros(ia.size, bool), []
    for column, rule in rules.items():
        if rule == IGNORE:
            continue
        recorded = a.recorded(column)[ia] & b.recorded(column)[ib]
        if not recorded.all():
            unchecked.append(column)
        if rule == EXACT:
            failed |= recorded & _differ(a.exact_values(column, _value), b.exact_values(column, _value), ia, ib)
    pairs = [a.requests[i] for i in ia.tolist()]
    missing = [k for k, found in zip(a.requests, both, strict=True) if not found]
    extra = [k for k in b.requests if k not in a.index]
    verdicts = [("diverged" if f else "identical") for f in failed.tolist()]
    verdicts += ["missing"] * len(missing) + ["extra"] * len(extra)
    return RequestResults(a, b, rules, margin, pairs + missing + extra, verdicts), sorted(unchecked)


def _differ(x, y, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """Per pair (ia[k] of A, ib[k] of B): the values differ."""
    if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
        return x[ia] != y[ib]
    xs = x.tolist() if isinstance(x, np.ndarray) else x
    ys = y.tolist() if isinstance(y, np.ndarray) else y
    return np.fromiter((xs[i] != ys[j] for i, j in zip(ia.tolist(), ib.tolist(), strict=True)), bool, ia.size)


def _verdict(counts: dict, judged: dict, settings_diff: list) -> tuple[str, list[str]]:
    from cloudvault.repro import timings as timing

    if settings_diff:
        return NOT_COMPARABLE, [f"setting {k}: {a!r} vs {b!r}" for k, a, b in settings_diff]
    if not (counts.get("identical") or counts.get("diverged")):
        return NOT_COMPARABLE, ["no request in common"]
    total = sum(counts.values())
    reasons = [f"{counts[v]} of {total} requests {v}" for v in ("diverged", "missing", "extra") if counts.get(v)]
    moved = timing.changed(judged)
    timing_reasons = [f"{t.label} {t.verdict}: x{t.ratio:.2f} (95% CI {t.ci[0]:.2f}-{t.ci[1]:.2f}) beyond noise "
                      f"+-{t.noise:.0%} measured over {t.runs} run(s) of A's kind" for t in moved]  # fmt: skip
    timing_reasons += [f"{t.label} inconclusive: x{t.ratio:.2f} ({t.note})" for t in judged.values()
                       if t.verdict == timing.INCONCLUSIVE and t.ratio is not None]  # fmt: skip
    if reasons:
        return OUTPUTS_DIVERGED, reasons + timing_reasons
    return (TIMINGS_CHANGED if moved else REPRODUCED), timing_reasons


def check_baselines(a, b, baselines: Sequence) -> None:
    """Each baseline (results.Results) is an independent run of A's kind: not RUN_A, RUN_B or another baseline
    again (the same folder by its real path, or the same result files by their digest), and with measured requests
    in common with A and B (warm-ups are never judged, so never noise). Else BaselineRefused, one line."""
    from cloudvault.repro.timings import measured_in, measured_keys, shared_measured

    seen = [("RUN_A", a), ("RUN_B", b)]
    shared = shared_measured(a.rows, b.rows)
    for base in baselines:
        for name, other in seen:
            if os.path.realpath(base.where) == os.path.realpath(other.where):
                raise BaselineRefused(baseline=base.label, why=f"is the same run as {name} (the same folder)")
            if base.digest is not None and base.digest == other.digest:
                raise BaselineRefused(baseline=base.label, why=f"holds the same results as {name} (a copy)")
        seen.append((f"--baseline {base.label}", base))
        if not measured_keys(base.rows):
            raise BaselineRefused(baseline=base.label, why="has no measured request (warm-ups are never judged)")
        if not measured_in(base.rows, shared).any():
            raise BaselineRefused(baseline=base.label, why="has no measured request in common with RUN_A and RUN_B")


def settings_differences(a: Mapping, b: Mapping, keys: Iterable[str] | None = None) -> list[tuple[str, object, object]]:
    """(dotted key, value in A, value in B) for each compared setting that differs; keys None: those in both."""
    flat_a, flat_b = _flatten(a), _flatten(b)
    wanted = list(keys) if keys is not None else [k for k in flat_a if k in flat_b]
    return [(k, flat_a.get(k), flat_b.get(k)) for k in wanted if _value(flat_a.get(k)) != _value(flat_b.get(k))]


def baseline_differences(a: Mapping, baseline: Mapping, name: str, keys: Iterable[str] | None = None) -> list:
    """settings_differences of a baseline from A, each key naming the baseline: ('gpu (baseline X)', a, b)."""
    return [(f"{k} (baseline {name})", x, y) for k, x, y in settings_differences(a, baseline, keys)]


def _flatten(settings: Mapping, prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in settings.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


FileResult = namedtuple("FileResult", "name verdict first_difference size_a size_b")


def compare_files(a: Mapping[str, bytes | None], b: Mapping[str, bytes | None]) -> RunComparison:
    """Recorded files (A) against regenerated ones (B), byte for byte; a verdict over all of them."""
    results = []
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x is None or y is None:
            verdict = "missing" if y is None else "extra"
            results.append(FileResult(name, verdict, None, len(x or b""), len(y or b"")))
            continue
        index = first_divergence(x, y)
        results.append(FileResult(name, "identical" if index is None else "diverged", index, len(x), len(y)))
    counts: dict[str, int] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    bad = [f"{r.name} {r.verdict}" + (f" at byte {r.first_difference}" if r.first_difference is not None else "")
           for r in results if r.verdict != "identical"]  # fmt: skip
    verdict = OUTPUTS_DIVERGED if bad else REPRODUCED if results else NOT_COMPARABLE
    return RunComparison(verdict, results, counts, {}, [], [], bad or ([] if results else ["no files"]))
