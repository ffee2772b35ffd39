"""The stand-in runner's tiny model: greedy and repeatable, ends at its EOS schedule or the cap, flips exactly the
token it is told to, and samples reproducibly by seed above temperature 0."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cloudvault.demo.serving import STANDIN_MODEL
from cloudvault.repro.compare import first_divergence
from cloudvault.repro.standin import generate, parse_diverge, simulated_timings

DOC = {"doc_id": "670bf1c4bb02136c067d2341", "prompt_head": [5, 9, 2], "standin_eos_after": 1956}


def test_greedy_output_repeats_and_ends_at_the_eos_schedule_or_the_cap():
    ids, margins = generate(STANDIN_MODEL, DOC, cap=8192)
    assert generate(STANDIN_MODEL, DOC, cap=8192) == (ids, margins)
    assert len(ids) == 1956 and ids[-1] == STANDIN_MODEL["eos_id"] and STANDIN_MODEL["eos_id"] not in ids[:-1]
    assert len(generate(STANDIN_MODEL, {**DOC, "standin_eos_after": None}, cap=8192)[0]) == 8192
    assert len(generate(STANDIN_MODEL, DOC, cap=1000)[0]) == 1000


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 1954))
def test_a_forced_flip_diverges_at_exactly_its_index(index):
    ids, _ = generate(STANDIN_MODEL, DOC, cap=8192)
    flipped, _ = generate(STANDIN_MODEL, DOC, cap=8192, diverge=(index, None))
    assert first_divergence(ids, flipped) == index


def test_the_recorded_rep2_shape_divergence_at_1498_ending_at_1855():
    flipped, _ = generate(STANDIN_MODEL, DOC, cap=8192, diverge=(1498, 1855))
    assert len(flipped) == 1855 and first_divergence(generate(STANDIN_MODEL, DOC, cap=8192)[0], flipped) == 1498
    assert parse_diverge("670bf1c4:1498:1855") == ("670bf1c4", 1498, 1855)
    assert parse_diverge("670bf1c4:1498") == ("670bf1c4", 1498, None)


def test_sampling_above_temperature_0_is_seeded():
    a = generate(STANDIN_MODEL, DOC, cap=8192, temperature=0.7, seed=1)[0]
    assert a == generate(STANDIN_MODEL, DOC, cap=8192, temperature=0.7, seed=1)[0]
    assert a != generate(STANDIN_MODEL, DOC, cap=8192, temperature=0.7, seed=2)[0]
    assert a != generate(STANDIN_MODEL, DOC, cap=8192)[0]


def test_the_cost_model_is_close_to_the_recorded_014_request():
    ttft, tpot = simulated_timings(STANDIN_MODEL, "sparsespec", 167_246, 1956)
    assert abs(ttft - 67.38) / 67.38 < 0.05 and abs(tpot - 14.12) / 14.12 < 0.10  # dashboard 3.5.8, idx 8
