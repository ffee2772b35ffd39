"""`vault repro` end to end with the local executor and the stand-in runner on the demo mirror: a new run folder,
inputs staged from the mirror, a verdict recorded in the catalog, preflight refusals, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

RECIPE = "014_ss20_temp0"


def processes_naming(text: str) -> list[int]:
    """Live processes whose command line holds text (the stand-in children name their run folder)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def run_folder(out: Path) -> Path:
    (folder,) = out.iterdir()
    return folder


def test_standin_run_reproduces_the_record_and_is_recorded(demo_catalog, demo_mirror, vault, tmp_path):
    out = tmp_path / "runs"
    result = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--standin", "--out", str(out))
    assert result.code == 0, result.err
    assert "REPRODUCED: outputs 24/24 identical" in result.out
    folder = run_folder(out)
    prov = json.loads((folder / "provenance.json").read_text())
    assert (prov["status"], prov["verdict"], prov["entry"]) == ("finished", "REPRODUCED", "014_ss20_temp0_chunk1024")
    assert prov["settings"]["env"]["LOG_SS"] == "1" and prov["settings"]["commit"] == "8246fb6"
    assert prov["exit_codes"] == {f"gpu{g}": 0 for g in range(8)}
    assert prov["environment"]["kind"] == "stand-in" and prov["plan"]["code"]["commit"] == "8246fb6"
    assert "--spec-stride 7" in prov["plan"]["processes"][0]["command"]
    assert sorted(p.name for p in (folder / "logs").iterdir())[:2] == ["gpu0.err", "gpu0.out"]
    assert "670bf1c4" in (folder / "logs/gpu7.out").read_text()
    assert len((folder / "compare.csv").read_text().splitlines()) == 25
    assert "| output_tokens | 93790 | 93790 | 0 |" in (folder / "REPORT.md").read_text()
    runs = vault("--catalog", str(demo_catalog), "runs", "014")
    assert runs.code == 0 and f"{folder.name}  local  finished    REPRODUCED" in runs.out
    found = vault("--catalog", str(demo_catalog), "search", folder.name, "--json")
    assert folder.name in found.out
    rep2 = "014/data/ss20_temp0_c1024_rep2/20260925_072725"
    versus = vault("--catalog", str(demo_catalog), "compare", rep2, folder.name, "--json")
    assert versus.code == 10 and json.loads(versus.out)["identical"] == 23  # the stand-in is rep1, not rep2
    assert vault("--catalog", str(demo_catalog), "compare", str(folder), "014").code == 0
    listed = vault("--catalog", str(demo_catalog), "repro", "--list")
    assert f"REPRODUCED ({folder.name})" in listed.out
    assert not list(demo_mirror.rglob("provenance.json"))


def test_a_standin_told_to_diverge_is_caught_at_that_token(demo_catalog, vault, tmp_path, monkeypatch):
    monkeypatch.setenv("VAULT_STANDIN_DIVERGE", "66ec2755:4242")
    out = tmp_path / "runs"
    result = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--standin", "--out", str(out), "--json")
    assert result.code == 10
    doc = json.loads(result.out)
    assert doc["verdict"] == "OUTPUTS_DIVERGED" and doc["identical"] == 23
    (bad,) = [r for r in doc["requests"] if r["verdict"] == "diverged"]
    assert (bad["request"], bad["first_divergence"], bad["failed"]) == ("66ec2755821e116aacb1b6f2@gpu6", 4242,
                                                                        ["output_ids"])  # fmt: skip
    rows = vault("--catalog", str(demo_catalog), "runs", "--requests", doc["run_id"])
    assert "diverged             4242  66ec2755821e116aacb1b6f2@gpu6" in rows.out


def test_recorded_logprobs_mark_a_near_tie_flip(demo_catalog, vault, tmp_path, monkeypatch):
    """A runner that records top-2 logprob margins: a flip where the top two were close is marked a near tie."""
    from cloudvault.demo.serving import E014, STANDIN_MODEL, doc_inputs, recorded_rows
    from cloudvault.repro.standin import generate

    doc = next(d for d in doc_inputs(recorded_rows(E014)) if d["doc_id"].startswith("67246903"))
    _, margins = generate(STANDIN_MODEL, doc, cap=8192)
    close = next(i for i, m in enumerate(margins) if m < 0.05)
    far = next(i for i, m in enumerate(margins) if m > 2)
    (tmp_path / "recipes/repro").mkdir(parents=True)
    text = (REPO / "recipes/repro/014_ss20_temp0.toml").read_text()
    (tmp_path / "recipes/repro/logprobs.toml").write_text(
        text.replace(
            "--mem-fraction {settings.mem_fraction}", "--mem-fraction {settings.mem_fraction} --record-logprobs"
        )
    )
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "recipes"))
    for index, near in ((close, True), (far, False)):
        monkeypatch.setenv("VAULT_STANDIN_DIVERGE", f"67246903:{index}")
        result = vault("--catalog", str(demo_catalog), "repro", "logprobs", "--standin", "--out",
                       str(tmp_path / f"runs{index}"), "--json")  # fmt: skip
        (bad,) = [r for r in json.loads(result.out)["requests"] if r["verdict"] == "diverged"]
        assert (bad["first_divergence"], bad["near_tie"]) == (index, near)


def test_instrumentation_that_differs_from_the_record_is_refused_before_running(demo_catalog, vault, tmp_path):
    out = tmp_path / "runs"
    args = ("--catalog", str(demo_catalog), "repro", RECIPE, "--standin", "--out", str(out), "--env", "LOG_SS=2")
    result = vault(*args)
    assert result.code == 6
    assert result.err.strip() == (
        "vault: error: preflight instrumentation failed: LOG_SS=2 but the record has LOG_SS=1: not comparable with "
        "the record (--force-preflight runs anyway and records it)"
    )
    assert not out.exists()
    forced = vault(*args, "--force-preflight", "--json")
    assert forced.code == 10
    doc = json.loads(forced.out)
    assert doc["verdict"] == "NOT_COMPARABLE"
    assert doc["settings_diff"] == [["env.LOG_SS", "1", "2"]]
    prov = json.loads((run_folder(out) / "provenance.json").read_text())
    assert prov["forced_preflight"] == ["instrumentation"]
    again = vault("--catalog", str(demo_catalog), "compare", "014", doc["run_id"])  # a run id names its folder
    assert again.code == 10
    assert "NOT_COMPARABLE: outputs 24/24 identical" in again.out and "setting env.LOG_SS: '1' vs '2'" in again.out


def test_without_the_standin_the_gpu_and_env_preflight_fail_here(demo_catalog, vault, tmp_path):
    result = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--out", str(tmp_path / "runs"))
    assert result.code == 6
    assert "preflight gpu failed: the recipe needs GPUs [0, 1, 2, 3, 4, 5, 6, 7]" in result.err
    dry = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--dry-run", "--out", str(tmp_path / "runs"))
    assert dry.code == 6
    assert (
        "FAIL environment      env 'sparsespec' is not restored here; run `vault restore env nebius` first" in dry.out
    )
    assert "--temperature 0 --seed 0 --output-cap 8192 --spec-stride 7 --budget-ratio 0.05" in dry.out
    assert "docs       20 documents, requests: 16 measured, 8 warmup, on 8 GPUs; prompts 128,996..205,995" in dry.out
    assert "--clip-length 214187" in dry.out  # the longest prompt (205,995) + 8,192, as dashboard 3.5.2.5 says
    assert "015_nebius_h8_raw_mirror/data/cs/sparsespec_git/benchmarks/longctx_bench.py" in dry.out
    assert not (tmp_path / "runs").exists()
    assert "executor" not in dry.out.lower().replace("--executor", "")  # local: the processes are where it runs
    slurm = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--dry-run", "--executor", "slurm", "--out",
                  str(tmp_path / "runs"))  # fmt: skip
    assert "slurm executor" in slurm.out and "#SBATCH" in slurm.out, slurm.out


def test_a_volatile_default_output_folder_is_refused(demo_catalog, vault, tmp_path):
    result = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--standin")  # HOME is under /tmp in tests
    assert result.code == 6
    assert "preflight output failed:" in result.err and "choose a persistent folder with --out" in result.err


def test_a_bad_recipe_key_is_named(demo_catalog, vault, tmp_path, monkeypatch):
    (tmp_path / "repro").mkdir()
    text = (REPO / "recipes/repro/014_ss20_temp0.toml").read_text()
    (tmp_path / "repro/mine.toml").write_text(text.replace("processes_per_gpu", "procs_per_gpu"))
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path))
    result = vault("--catalog", str(demo_catalog), "repro", "mine", "--dry-run")
    assert result.code == 2
    assert "unknown key 'run.procs_per_gpu'" in result.err
    (tmp_path / "repro/mine.toml").write_text(text.replace('tps = "ignore"', 'tps = "roughly"'))
    result = vault("--catalog", str(demo_catalog), "repro", "mine", "--dry-run")
    assert result.code == 2 and "'compare.rules.tps'" in result.err


def test_ctrl_c_stops_the_children_and_records_the_run_as_interrupted(demo_catalog, tmp_path):
    out = tmp_path / "runs"
    env = {**os.environ, "VAULT_STANDIN_DELAY": "30", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "cloudvault", "--catalog", str(demo_catalog), "repro", RECIPE, "--standin", "--out"]
    proc = subprocess.Popen([*argv, str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not list(out.glob("*/logs/gpu7.out")):
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    folder = run_folder(out)
    prov = json.loads((folder / "provenance.json").read_text())
    assert prov["status"] == "interrupted"
    assert set(prov["exit_codes"]) == {f"gpu{g}" for g in range(8)}
    assert all(code is not None and code != 0 for code in prov["exit_codes"].values())  # stopped by vault
    assert processes_naming(str(folder)) == []
    from cloudvault.catalog.db import open_catalog
    from cloudvault.catalog.records import runs

    (recorded,) = runs(open_catalog(demo_catalog, readonly=True), run_id=folder.name)
    assert recorded.status == "interrupted"


@pytest.mark.parametrize("recipe", ["013_vanilla126_temp0"])
def test_the_013_twin_runs_without_recorded_token_ids(demo_catalog, vault, tmp_path, recipe):
    result = vault("--catalog", str(demo_catalog), "repro", recipe, "--standin", "--out", str(tmp_path / "r"))
    # the headline agrees with its rows: 126 identical rows, none "out of tolerance"; the warm-up pairs' queueing
    # (16 requests the stand-in does not model) is never judged, and one run each makes no timing a change
    head = next(line for line in result.out.splitlines() if line.startswith("REPRODUCED"))
    assert head.startswith("REPRODUCED: outputs 126/126 identical; timings ")
    table = (tmp_path / "r").glob("*/compare.csv")
    rows = next(table).read_text().splitlines()[1:]
    assert len(rows) == 126 and all(",identical," in row for row in rows)
    assert "not checked: output_ids (not recorded on one side)" in result.out
    assert result.code == 0


def test_a_recorded_repetition_that_is_the_record_itself_is_a_recipe_error(demo_catalog, vault, tmp_path, monkeypatch):
    (tmp_path / "repro").mkdir()
    text = (REPO / "recipes/repro/014_ss20_temp0.toml").read_text()
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path))
    rep2 = "data/ss20_temp0_c1024_rep2/20260925_072725"
    for again in ("data/20260925_070231", "data/20260925_070231/", "./data/20260925_070231", f"{rep2}/"):
        (tmp_path / "repro/mine.toml").write_text(text.replace(f'repetitions = ["{rep2}"]',
                                                               f'repetitions = ["{rep2}", "{again}"]'))  # fmt: skip
        result = vault("--catalog", str(demo_catalog), "repro", "mine", "--dry-run")
        assert result.code == 2 and result.err.count("\n") == 1, (again, result.err)
        assert "'record.repetitions'" in result.err and again in result.err


def test_a_noise_floor_of_true_is_refused(demo_catalog, vault, tmp_path, monkeypatch):
    (tmp_path / "repro").mkdir()
    text = (REPO / "recipes/repro/014_ss20_temp0.toml").read_text()
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path))
    for bad in ("true", "{ tpot = true }", "nan", "-0.1"):
        (tmp_path / "repro/mine.toml").write_text(f"{text}\n[timings]\nnoise = {bad}\n")
        result = vault("--catalog", str(demo_catalog), "repro", "mine", "--dry-run")
        assert result.code == 2 and "'timings.noise'" in result.err and result.err.count("\n") == 1, (bad, result.err)


def test_repeat_is_validated_with_or_without_dry_run_and_its_bound_is_in_help(demo_catalog, vault, tmp_path):
    for n in ("0", "-1", "101", "x"):
        for dry in (["--dry-run"], ["--standin", "--out", str(tmp_path / "runs")]):
            result = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--repeat", n, *dry)
            assert result.code == 2 and result.err.count("\n") == 1 and "--repeat" in result.err, (n, dry, result.err)
            assert not (tmp_path / "runs").exists()
    helped = vault("repro", "--help")
    assert "1..100 " in " ".join(helped.out.split())


def test_a_detach_that_cannot_be_is_one_line_and_runs_nothing(demo_catalog, vault, tmp_path):
    """--detach needs an executor that queues (Slurm), and is one run: each wrong combination is exit 2, one line,
    no run folder and no run recorded."""
    out = tmp_path / "runs"
    wrong = ((["--detach"], "--detach needs --executor slurm"),
             (["--executor", "slurm", "--detach", "--repeat", "2"], "--detach takes no --repeat"))  # fmt: skip
    for flags, said in wrong:
        result = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--standin", "--out", str(out), *flags)
        assert result.code == 2 and result.err.count("\n") == 1 and said in result.err, (flags, result.err)
        assert not out.exists()
    listed = vault("--catalog", str(demo_catalog), "runs", "014", "--json")
    assert str(out) not in listed.out


def test_the_plan_document_is_a_frozen_typed_result_its_json_the_dry_runs(demo_catalog, vault, tmp_path):
    """describe(plan) hands over a frozen PlanDocument (inputs, processes, the compare as typed records), whose
    to_json() is the plan part of `--dry-run --json` and of provenance.json."""
    import dataclasses

    from cloudvault.catalog.db import open_catalog
    from cloudvault.repro import plan as planning
    from cloudvault.repro.dry_run import dry_run
    from cloudvault.repro.executors import executor
    from cloudvault.repro.recipe import load

    conn = open_catalog(demo_catalog, readonly=True)
    try:
        options = planning.RunOptions(tmp_path / "runs", True, True)
        described = planning.describe(planning.build(conn, load(RECIPE), tmp_path / "runs/x", options))
        planned = dry_run(conn, load(RECIPE), executor("local"), options)
    finally:
        conn.close()
    for value in (described, described.record, described.compare, *described.inputs, *described.processes):
        assert dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen, value
    gpu_check = next(c for c in planned.preflight if c.name == "gpu")  # each preflight check a record, not a dict
    assert gpu_check.ok is True and planned.to_json()["preflight"][0] == planned.preflight[0]._asdict()
    assert described.processes[0].gpu == 0 and described.record.folder
    dry = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--standin", "--dry-run", "--json", "--out",
                str(tmp_path / "runs"))  # fmt: skip
    shown = json.loads(dry.out)
    plan = described.to_json()
    assert list(shown)[: len(plan)] == list(plan)  # the plan's fields first, in its order
    same = [k for k in plan if k not in ("run_dir", "inputs", "processes")]  # those name the run folder
    assert {k: shown[k] for k in same} == {k: plan[k] for k in same}
    assert [p["env"] for p in shown["processes"]] == [p["env"] for p in plan["processes"]]
    assert isinstance(plan["processes"][0]["cpu_cores"], str)
