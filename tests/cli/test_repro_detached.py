"""A detached run is judged by the plan it was queued with: its run folder keeps the recipe it ran (plan.json, the
recipe's source and hash); an edit of the recipe after it was queued is named when the run is collected, never
silently used. Slurm here is three small scripts on PATH (sinfo, sbatch running the array's tasks at once,
scontrol saying they completed): the executor's own code submits, polls and collects."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO

from tests.cli.json_shapes import check

RECIPE = REPO / "recipes/repro/014_ss20_temp0.toml"
REP2 = "data/ss20_temp0_c1024_rep2/20260925_072725"

FAKE = {
    "sinfo": 'echo "debug*|(null)"',
    "sbatch": 'script="${@: -1}"; n=$(sed -n "s/^#SBATCH --array=0-\\([0-9]*\\)$/\\1/p" "$script")\n'
    'for i in $(seq 0 "$n"); do SLURM_ARRAY_TASK_ID=$i bash "$script" >/dev/null 2>&1; done; echo 4242',
    "scontrol": 'echo "JobId=4242 ArrayJobId=4242 ArrayTaskId=0-63 JobState=COMPLETED Reason=None ExitCode=0:0"',
    "sacct": "exit 1",
}


@pytest.fixture
def fake_slurm(fake_commands):
    fake_commands(FAKE)


def test_a_detached_run_is_judged_by_the_recipe_it_was_queued_with(demo_catalog, vault, tmp_path, fake_slurm,
                                                                    monkeypatch):  # fmt: skip
    recipes = tmp_path / "recipes"
    (recipes / "repro").mkdir(parents=True)
    mine = recipes / "repro/mine.toml"
    shutil.copy(RECIPE, mine)
    monkeypatch.setenv("VAULT_RECIPES", str(recipes))
    db = str(demo_catalog)
    queued = vault("--catalog", db, "repro", "mine", "--standin", "--executor", "slurm", "--detach", "--out",
                   str(tmp_path / "runs"), "--json")  # fmt: skip
    assert queued.code == 0, queued.err
    run_id = json.loads(queued.out)["run_id"]
    text = mine.read_text()  # judged against rep2 (the known divergence) by the edited recipe
    mine.write_text(text.replace('folder = "data/20260925_070231"', f'folder = "{REP2}"')
                    .replace(f'repetitions = ["{REP2}"]', "repetitions = []"))  # fmt: skip
    collected = vault("--catalog", db, "runs", "collect", "014")
    assert collected.code == 0, collected.err
    assert f"recipe mine was edited after run {run_id} was queued" in collected.err, collected.err
    listed = vault("--catalog", db, "runs", "014", "--json")
    (run,) = json.loads(listed.out)
    assert (run["run_id"], run["status"], run["verdict"]) == (run_id, "finished", "REPRODUCED")
    stored = json.loads((Path(run["folder"]) / "plan.json").read_text())
    assert stored["recipe"]["hash"] == run["recipe_hash"] and stored["plan"]["record"]["folder"] != REP2


def test_a_stored_plan_that_does_not_match_the_recorded_recipe_hash_is_refused(demo_catalog, vault, tmp_path,
                                                                               fake_slurm):  # fmt: skip
    db = str(demo_catalog)
    queued = vault("--catalog", db, "repro", "014_ss20_temp0", "--standin", "--executor", "slurm", "--detach",
                   "--out", str(tmp_path / "runs"), "--json")  # fmt: skip
    assert queued.code == 0, queued.err
    (folder,) = (tmp_path / "runs").iterdir()
    stored = json.loads((folder / "plan.json").read_text())
    stored["recipe"]["source"] = stored["recipe"]["source"].replace("0.10", "0.99")
    (folder / "plan.json").write_text(json.dumps(stored))
    collected = vault("--catalog", db, "runs", "collect")
    assert "does not match the recipe hash recorded" in collected.err, collected.err
    (run,) = json.loads(vault("--catalog", db, "runs", "--json").out)
    assert run["status"] == "queued"


def test_vault_runs_only_reads_and_vault_runs_collect_collects(demo_catalog, vault, tmp_path, fake_slurm,
                                                               monkeypatch):  # fmt: skip
    from cloudvault.catalog import db as catalog_db

    opened = []
    real_open = catalog_db.open_catalog
    monkeypatch.setattr(catalog_db, "open_catalog", lambda *a, **k: opened.append(k["readonly"]) or real_open(*a, **k))
    db = str(demo_catalog)
    queued = vault("--catalog", db, "repro", "014_ss20_temp0", "--standin", "--executor", "slurm", "--detach",
                   "--out", str(tmp_path / "runs"), "--json")  # fmt: skip
    assert queued.code == 0, queued.err
    opened.clear()
    listed = vault("--catalog", db, "runs", "014")  # the job has ended: a listing still leaves it queued
    assert listed.code == 0 and opened == [True], (opened, listed.err)
    assert "queued" in listed.out and "`vault runs collect` collects" in listed.err
    opened.clear()
    collected = vault("--catalog", db, "runs", "collect", "014", "--json")
    assert collected.code == 0 and opened == [False], (opened, collected.err)
    (run,) = json.loads(collected.out)
    assert (run["status"], run["verdict"]) == ("finished", "REPRODUCED")
    check(json.loads(collected.out), "runs.md", "runs")
    requests = vault("--catalog", db, "runs", "--requests", run["run_id"], "--json")
    check(json.loads(requests.out), "runs.md", "--requests")
    assert vault("--catalog", db, "runs", "014", "015").code == 2


def test_repro_compare_and_detach_json_are_the_documented_shapes(demo_catalog, vault, tmp_path, fake_slurm):
    db = str(demo_catalog)
    compared = vault("--catalog", db, "compare", "014", f"014/{REP2}", "--json")
    assert compared.code == 10, compared.err  # the known divergence of rep2
    check(json.loads(compared.out), "compare.md", "compare")
    ran = vault("--catalog", db, "repro", "014_ss20_temp0", "--standin", "--out", str(tmp_path / "a"), "--json")
    assert ran.code == 0, ran.err
    check(json.loads(ran.out), "repro.md", "repro")
    queued = vault("--catalog", db, "repro", "014_ss20_temp0", "--standin", "--executor", "slurm", "--detach",
                   "--out", str(tmp_path / "b"), "--json")  # fmt: skip
    check(json.loads(queued.out), "repro.md", "--detach")


def test_repro_list_dry_run_and_repeat_json_are_the_documented_shapes(demo_catalog, vault, tmp_path):
    db = str(demo_catalog)
    listed = vault("--catalog", db, "repro", "--list", "--json")
    assert listed.code == 0, listed.err
    check(json.loads(listed.out), "repro.md", "--list")
    planned = vault("--catalog", db, "repro", "014_ss20_temp0", "--standin", "--dry-run", "--out", str(tmp_path),
                    "--json")  # fmt: skip
    assert planned.code == 0, planned.err
    check(json.loads(planned.out), "repro.md", "--dry-run")
    repeated = vault("--catalog", db, "repro", "014_ss20_temp0", "--standin", "--repeat", "2", "--out",
                     str(tmp_path / "r"), "--json")  # fmt: skip
    assert repeated.code == 0, repeated.err
    doc = json.loads(repeated.out)
    check(doc, "repro.md", "--repeat")
    for run in doc["runs"]:
        check(run, "repro.md", "repro")
