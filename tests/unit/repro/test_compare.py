"""The compare rules as pure functions: exact, ignore, legacy tolerances shown not judged, verdicts, near-tie flips."""

from __future__ import annotations

import csv

import pytest
from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudvault.repro import compare, metrics
from cloudvault.repro.compare import (
    EXACT,
    IGNORE,
    NOT_COMPARABLE,
    OUTPUTS_DIVERGED,
    REPRODUCED,
    Tolerance,
    compare_runs,
)

RULES = {
    "output_ids": EXACT,
    "output_tokens": EXACT,
    "finish": EXACT,
    "ttft_s": Tolerance(rtol=0.05),
    "tpot_ms": Tolerance(rtol=0.05),
    "tps": IGNORE,
}

requests = st.dictionaries(
    st.text("0123456789abcdef@gpu", min_size=1, max_size=12),
    st.fixed_dictionaries(
        {
            "output_ids": st.lists(st.integers(0, 151_935), min_size=1, max_size=60),
            "finish": st.sampled_from(["eos", "cap"]),
            "ttft_s": st.floats(0.01, 500, allow_nan=False),
            "tpot_ms": st.floats(1, 100, allow_nan=False),
            "tps": st.floats(0, 100, allow_nan=False),
        }
    ),
    min_size=1,
    max_size=8,
)


def with_lengths(rows: dict) -> dict:
    return {k: {**r, "output_tokens": len(r["output_ids"])} for k, r in rows.items()}


@settings(max_examples=200, deadline=None)
@given(requests)
def test_identical_runs_are_always_reproduced(rows):
    rows = with_lengths(rows)
    result = compare_runs(rows, {k: dict(r) for k, r in rows.items()}, RULES)
    assert result.verdict == REPRODUCED
    assert all(r.verdict == "identical" and r.first_divergence is None for r in result.requests)
    assert result.counts == {"identical": len(rows)}


@settings(max_examples=200, deadline=None)
@given(requests, st.data())
def test_one_changed_token_diverges_at_exactly_that_index(rows, data):
    rows = with_lengths(rows)
    key = data.draw(st.sampled_from(sorted(rows)))
    ids = rows[key]["output_ids"]
    index = data.draw(st.integers(0, len(ids) - 1))
    changed = list(ids)
    changed[index] = (changed[index] + 1) % 151_936
    other = {k: dict(r) for k, r in rows.items()}
    other[key]["output_ids"] = changed
    result = compare_runs(rows, other, RULES)
    assert result.verdict == OUTPUTS_DIVERGED
    bad = [r for r in result.requests if r.verdict != "identical"]
    assert [(r.request, r.verdict, r.first_divergence, r.shared_prefix) for r in bad] == [
        (key, "diverged", index, index)
    ]
    assert result.reasons == [f"1 of {len(rows)} requests diverged"]


@given(st.lists(st.integers(0, 9), max_size=30), st.lists(st.integers(0, 9), max_size=30))
def test_first_divergence_is_the_shared_prefix_length(a, b):
    index = compare.first_divergence(a, b)
    if a == b:
        assert index is None
    else:
        assert a[:index] == b[:index]
        assert index == min(len(a), len(b)) or a[index] != b[index]


def test_a_legacy_tolerance_is_shown_per_request_never_judged():
    a = {f"r{i}": {"ttft_s": 10.0} for i in range(10)}
    b = {f"r{i}": {"ttft_s": 10.2} for i in range(10)}
    b["r9"]["ttft_s"] = 20.0
    result = compare_runs(a, b, {"ttft_s": Tolerance(rtol=0.05)})
    assert result.verdict == REPRODUCED and result.counts == {"identical": 10}  # one run each: no timing change
    assert result.requests[-1].deltas["ttft_s"][3] is False and result.requests[0].deltas["ttft_s"][3] is True
    assert compare_runs(a, b, {"ttft_s": IGNORE}).verdict == REPRODUCED


def test_missing_and_extra_requests_and_no_common_request():
    a = {"x": {"finish": "eos"}, "y": {"finish": "eos"}}
    result = compare_runs(a, {"x": {"finish": "eos"}, "z": {"finish": "eos"}}, {"finish": EXACT})
    assert result.verdict == OUTPUTS_DIVERGED
    assert result.counts == {"identical": 1, "missing": 1, "extra": 1}
    assert compare_runs(a, {"z": {"finish": "eos"}}, {"finish": EXACT}).verdict == NOT_COMPARABLE


def test_settings_that_differ_make_runs_not_comparable_and_are_named():
    diff = compare.settings_differences({"env": {"LOG_SS": "1"}, "seed": 0}, {"env": {"LOG_SS": "2"}, "seed": 0})
    assert diff == [("env.LOG_SS", "1", "2")]
    rows = {"x": {"finish": "eos"}}
    result = compare_runs(rows, rows, {"finish": EXACT}, settings_diff=diff)
    assert result.verdict == NOT_COMPARABLE
    assert result.reasons == ["setting env.LOG_SS: '1' vs '2'"]
    assert compare.settings_differences({"a": 1, "b": 2}, {"a": "1"}, keys=["a"]) == []


def test_a_divergence_at_a_near_tie_is_marked_when_logprobs_are_recorded():
    a = {"r": {"output_ids": [1, 2, 3, 4], "top2_margin": [2.0, 1.5, 0.01, 3.0]}}
    b = {"r": {"output_ids": [1, 2, 9, 4]}}
    assert compare_runs(a, b, {"output_ids": EXACT}).requests[0].near_tie is True
    a["r"]["top2_margin"] = [2.0, 1.5, 0.9, 3.0]
    assert compare_runs(a, b, {"output_ids": EXACT}).requests[0].near_tie is False
    del a["r"]["top2_margin"]
    assert compare_runs(a, b, {"output_ids": EXACT}).requests[0].near_tie is None


def test_a_rule_on_a_column_one_run_lacks_is_listed_as_unchecked():
    result = compare_runs({"r": {"output_tokens": 5}}, {"r": {"output_tokens": 5, "output_ids": [1]}},
                          {"output_ids": EXACT, "output_tokens": EXACT})  # fmt: skip
    assert result.verdict == REPRODUCED
    assert result.unchecked == ["output_ids"]


def test_parse_rule_accepts_the_recipe_forms_only():
    assert compare.parse_rule("exact") == EXACT
    assert compare.parse_rule({"rtol": 0.1, "percentile": 90}) == Tolerance(0.1, 0.0, 90)
    with pytest.raises(ValueError):
        compare.parse_rule({"rtol": 0.1, "pct": 90})


def test_files_compare_byte_for_byte():
    result = compare.compare_files({"a.csv": b"x,1\n", "b.csv": b"y"}, {"a.csv": b"x,2\n", "b.csv": b"y"})
    assert result.verdict == OUTPUTS_DIVERGED
    assert result.reasons == ["a.csv diverged at byte 2"]
    assert compare.compare_files({"a": b"1"}, {"a": b"1"}).verdict == REPRODUCED


def test_timings_and_totals_follow_the_seed_formulas():
    t = metrics.request_timings(100.0, 167.38, 167.38 + 0.01412 * 1955, 1956)
    assert t["ttft_s"] == pytest.approx(67.38)
    assert t["tpot_ms"] == pytest.approx(14.12)
    assert t["e2e_s"] == pytest.approx(95.0, abs=0.05)
    table = REPO / "manifests/marvell_cloud/014_per_request.csv"
    rows = [r for r in csv.DictReader(table.open(encoding="utf-8")) if r["role"] == "measured"]
    got = metrics.totals(rows)
    # dashboard 3.5.3: 16, 93,790, 38.68 tok/s (E2E is stored to 0.1 s, so 38.67), 73.41/71.28 s, 13.50/13.59 ms
    assert (got["requests"], got["output_tokens"], got["hit_cap"], got["output_median"]) == (16, 93790, 9, 8192)
    assert (got["ttft_mean_s"], got["ttft_median_s"], got["tpot_mean_ms"], got["tpot_median_ms"]) == (
        73.41, 71.28, 13.5, 13.59)  # fmt: skip
    assert got["tokens_per_s"] == pytest.approx(38.68, abs=0.011)


@settings(max_examples=200, deadline=None)
@given(requests, st.floats(-0.049, 0.049), st.floats(0.051, 0.5))
def test_with_one_run_each_timings_never_change_the_verdict(rows, inside, outside):
    rows = with_lengths(rows)
    near = {k: {**r, "ttft_s": r["ttft_s"] * (1 + inside)} for k, r in rows.items()}
    assert compare_runs(rows, near, RULES).verdict == REPRODUCED
    far = {k: {**r, "ttft_s": r["ttft_s"] * (1 + outside)} for k, r in rows.items()}
    result = compare_runs(rows, far, RULES)
    assert result.verdict == REPRODUCED and result.timings["ttft"].verdict == "inconclusive"
    assert "one run each; pass --repeat or --baseline" in result.timings["ttft"].note
