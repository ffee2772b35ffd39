"""`vault repro`'s one call (repro/actions.py) and the exit codes its results carry: the mode's combinations are
checked by the operation, before anything is planned, staged or recorded; no command line in between."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cloudvault import errors
from cloudvault.repro.actions import LIST, RUN, ExecutorChoice, ReproOptions, repro
from cloudvault.repro.judge import Judged
from cloudvault.repro.outcomes import DryRun, RecipesListed, RunBatch, RunJudged, RunQueued
from cloudvault.repro.plan import RunOptions
from cloudvault.repro.preflight import Check
from cloudvault.repro.recipe import load


def test_the_list_needs_no_catalog_and_is_a_typed_list_of_recipes():
    listed = repro(None, ReproOptions(LIST))
    assert isinstance(listed, RecipesListed) and listed.exit_code == errors.OK
    doc = listed.to_json()
    assert "014_ss20_temp0" in [r["recipe"] for r in doc] and all(r["last_run"] is None for r in doc)


@pytest.mark.parametrize(("where", "repeat", "said"), [
    (ExecutorChoice("local"), 1, "--detach needs --executor slurm"),
    (ExecutorChoice("slurm"), 2, "a detached run is one run"),
])  # fmt: skip
def test_a_detach_that_cannot_be_is_refused_before_anything_is_done(tmp_path, where, repeat, said):
    options = ReproOptions(RUN, load("014_ss20_temp0"), RunOptions(tmp_path / "runs", True, True), where,
                           repeat=repeat, detach=True)  # fmt: skip
    with pytest.raises(errors.UsageError) as refused:
        repro(None, options)  # no catalog: the refusal comes before the run would touch one
    assert said in refused.value.message
    assert not (tmp_path / "runs").exists()


def _dry_run(failed: tuple[str, ...], forced: bool) -> DryRun:
    checks = tuple(Check(n, n not in failed, "") for n in ("python", "gpu", "environment"))
    return DryRun({}, {}, checks, None, (), forced=forced)


@pytest.mark.parametrize(("failed", "forced", "code"), [
    ((), False, errors.OK),
    (("gpu",), False, errors.ENVIRONMENT),
    (("gpu",), True, errors.OK),
    (("python", "gpu"), True, errors.PREREQUISITE),  # a runner without its modules is never forced
])  # fmt: skip
def test_a_dry_run_exits_as_the_run_would(failed, forced, code):
    assert _dry_run(failed, forced).exit_code == code


def _judged(verdict: str) -> RunJudged:
    return RunJudged("r", "/runs/r", "data/x", SimpleNamespace(verdict=verdict))


def test_a_batch_reproduces_only_when_every_run_does_and_a_queued_run_is_ok():
    assert RunBatch((_judged("REPRODUCED"), _judged("REPRODUCED"))).exit_code == errors.OK
    assert RunBatch((_judged("REPRODUCED"), _judged("TIMINGS_CHANGED"))).exit_code == errors.REPRO_MISMATCH
    assert RunQueued("r", "4242").exit_code == errors.OK


def test_compare_exits_by_the_verdict_or_by_the_one_expected():
    diverged = Judged(SimpleNamespace(verdict="OUTPUTS_DIVERGED"), None, None)
    assert diverged.exit_code() == errors.REPRO_MISMATCH
    assert diverged.exit_code("DIVERGED") == diverged.exit_code("OUTPUTS_DIVERGED") == errors.OK
    assert diverged.exit_code("REPRODUCED") == errors.REPRO_MISMATCH
    assert Judged(SimpleNamespace(verdict="REPRODUCED"), None, None).exit_code() == errors.OK
