"""A run kept as columns (cloudvault/repro/columns.py) is the run the validating reader reads: the same rows for
every recorded result folder and for generated tables (hypothesis), the same refusals, and compare says the same
thing over the columns as over the rows; the windowed bootstrap draws what full resampling draws."""

from __future__ import annotations

import string

import numpy as np
import pytest
from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudvault.readers import DamagedFile
from cloudvault.repro import columns, results, timings
from cloudvault.repro.compare import DEFAULT_RULES, EXACT, TIMING, compare_runs

FOLDERS = sorted({p.parent for p in [*REPO.glob("bench/repro_h200/runs/*/*/per_request.csv"),
                                      *REPO.glob("recipes/repro/recorded/**/per_request.csv")]})  # fmt: skip


def legacy(files: dict) -> dict:
    """The rows as the validating reader alone reads them."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(columns, "from_csv", lambda *a: None)
        return results.parse(files)


def as_dicts(rows) -> dict:
    return {k: dict(rows[k]) for k in rows}


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_recorded_folder_reads_the_same_as_columns(folder):
    files = results.read_folder(folder)
    rows = results.parse(files)
    assert isinstance(rows, columns.RequestTable)
    assert as_dicts(rows) == legacy(files) and rows.keys() == legacy(files).keys() and list(rows) == list(legacy(files))
    assert results.Results("x", rows, None, "x").totals() == results.Results("x", legacy(files), None,
                                                                               "x").totals()  # fmt: skip


def test_compare_over_columns_says_what_compare_over_rows_says():
    smoke = REPO / "bench/repro_h200/runs/smoke"
    runs = {p.name: results.parse(results.read_folder(p)) for p in sorted(smoke.iterdir()) if p.is_dir()}
    a, base = runs.pop("alone_01"), [runs.pop("alone_02"), runs.pop("alone_03")]
    rules = {**DEFAULT_RULES, "finish": EXACT, "prompt_tokens": EXACT, "tps": TIMING}
    for b in runs.values():
        fast = compare_runs(a, b, rules, baselines=base)
        slow = compare_runs(as_dicts(a), as_dicts(b), rules, baselines=[as_dicts(r) for r in base])
        assert fast._replace(requests=list(fast.requests)) == slow


CELL = st.one_of(st.integers(-5, 10**6).map(str), st.floats(0, 1e4, allow_nan=False).map(lambda f: f"{f:.4f}"),
                 st.just(""))  # fmt: skip
TEXT = st.text(string.ascii_lowercase + string.digits + "-_. ", max_size=6)


@st.composite
def tables(draw) -> tuple[str, str]:
    """Two per_request.csv texts over mostly the same requests, cells of every kind the harness writes (and some
    it does not: blank lines, a bad number, a short row, a request twice)."""
    header = ["idx", "doc_id", "role", "gpu", "output_tokens", "ttft_s", "tpot_ms", "e2e_s", "tps", "finish", "note"]
    n = draw(st.integers(0, 30))
    docs = draw(st.lists(st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=5), min_size=n,
                         max_size=n))  # fmt: skip
    texts = []
    for _ in range(2):
        lines = [",".join(header)]
        for i, doc in enumerate(docs):
            if draw(st.integers(0, 9)) == 0:
                continue
            cells = [str(i), doc, draw(st.sampled_from(["measured", "warmup", ""])), draw(st.sampled_from("0127")),
                     *(draw(CELL) for _ in range(5)), draw(st.sampled_from(["cap", "stop", " stop"])), draw(TEXT)]
            lines.append(",".join(cells))
        flaw = draw(st.sampled_from(["", "", "", "blank", "nan", "short", "twice", "word"]))
        if lines[1:] and flaw:
            lines.insert(draw(st.integers(1, len(lines))), {"blank": "", "nan": lines[-1].replace(",", ",nan,", 1),
                         "short": "1,2", "twice": lines[-1], "word": lines[-1].replace(",", ",x7,", 1)}[flaw])
        texts.append("\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n"])))
    return texts[0], texts[1]


def parsed(text: str, *, alone: bool) -> object:
    """The rows of a per_request.csv, or the one line that refuses it."""
    try:
        return (legacy if alone else results.parse)({"per_request.csv": text.encode()})
    except (DamagedFile, results.DuplicateRequest) as exc:
        return str(exc)


@settings(max_examples=200, deadline=None)
@given(tables())
def test_generated_tables_read_as_columns_are_what_the_validating_reader_reads(pair):
    for text in pair:
        fast, slow = parsed(text, alone=False), parsed(text, alone=True)
        assert (fast if isinstance(fast, str) else as_dicts(fast)) == slow
    a, b = (parsed(t, alone=False) for t in pair)
    if isinstance(a, str) or isinstance(b, str):
        return
    rules = {**DEFAULT_RULES, "finish": EXACT, "note": EXACT, "idx": EXACT, "tps": TIMING}
    fast, slow = compare_runs(a, b, rules), compare_runs(as_dicts(a), as_dicts(b), rules)
    assert fast._replace(requests=list(fast.requests)) == slow


@pytest.mark.parametrize("rounding", [None, 2])
@pytest.mark.parametrize("window", [timings.WINDOW, 0.05])
def test_the_windowed_bootstrap_draws_what_full_resampling_draws(monkeypatch, rounding, window):
    """n = 3,000 pairs: the windowed interval is full resampling's within Monte-Carlo error; with a window too
    narrow to hold the median (0.05) every resample is drawn again in full, and the interval is still right."""
    monkeypatch.setattr(timings, "WINDOW", window)
    rng = np.random.default_rng(7)
    x = rng.lognormal(0, 0.5, 3000)
    y = x * 1.05 * rng.lognormal(0, 0.2, 3000)
    if rounding:
        x, y = x.round(rounding), y.round(rounding)
    assert len(x) > timings.EXACT_DRAWS
    _, (low, high) = timings.bootstrap_ratio(x, y, seed=3)
    full = np.sort(timings._exact_ratios(x, y, 3))
    tail = (1 - timings.CONFIDENCE) / 2
    plain = (full[int(tail * (timings.RESAMPLES - 1))], full[int((1 - tail) * (timings.RESAMPLES - 1))])
    width = plain[1] - plain[0]
    assert abs(low - plain[0]) < 0.15 * width and abs(high - plain[1]) < 0.15 * width


@pytest.mark.parametrize("alone", [False, True])
def test_a_negative_time_or_timestamps_that_go_back_are_a_damaged_file(alone):
    rows = (REPO / "bench/repro_h200/runs/smoke/alone_01/per_request.csv").read_text().splitlines()
    cells = rows[2].split(",")
    cells[8] = "-4.679"  # tpot_ms
    text = "\n".join([rows[0], rows[1], ",".join(cells), *rows[3:]])
    assert parsed(text, alone=alone) == ("per_request.csv: request p1-032@gpu0: tpot_ms = -4.679 is negative; it is "
                                         "not as vault wrote it (edited, or cut short): fix or remove it")
    stream = '{"request": "p1@gpu0", "t_start": 5.0, "t_first": 4.0, "t_done": 6.0, "output_ids": [1, 2]}\n'
    with pytest.raises(DamagedFile, match="request p1@gpu0: its timestamps go back"):
        results.parse({"requests.jsonl": stream.encode()})
