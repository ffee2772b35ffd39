"""The gpu_greedy_smoke recipe and its runner: the recorded folder ships in the demo; on a machine without a GPU the
dry run says NOT_COMPARABLE here and why; the runner (torch + transformers, skipped where they are not installed,
never part of CI) repeats its token ids, writes the harness's shape, and a CPU run against a GPU record is
NOT_COMPARABLE on the setting `gpu`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from cloudvault.repro import results

# runs the GPU smoke runner end to end
pytestmark = pytest.mark.gpu

RECIPE = "gpu_greedy_smoke"
RECORDED = "_repro/gpu_greedy_smoke/recorded"


def test_the_recorded_folder_ships_in_the_demo_in_the_harness_shape(demo_mirror):
    folder = demo_mirror / RECORDED
    rows = results.parse(results.read_folder(folder))
    assert len(rows) == 6 and all(len(r["output_ids"]) == r["output_tokens"] for r in rows.values())
    assert {r["role"] for r in rows.values()} == {"warmup", "measured"}
    about = json.loads((folder / "run.json").read_text())["settings"]
    assert {"gpu", "dtype", "seed", "model_config", "torch"} <= set(about)


@pytest.fixture
def torch_importable(tmp_path, monkeypatch):
    """A machine where the runner's Python finds torch and transformers (empty stand-in packages on PYTHONPATH, so
    a dry run's answer does not depend on whether this machine has them: it never imports them)."""
    stubs = tmp_path / "stubs"
    for name in ("torch", "transformers"):
        (stubs / name).mkdir(parents=True)
        (stubs / name / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(stubs))


@pytest.mark.usefixtures("torch_importable")
def test_the_dry_run_without_a_gpu_says_not_comparable_here(demo_catalog, vault, tmp_path, monkeypatch):
    monkeypatch.setattr("cloudvault.tools.gpu.local_gpus", lambda *a, **k: None)  # a machine without nvidia-smi
    result = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--dry-run", "--out", str(tmp_path))
    assert result.code == 6
    assert "FAIL gpu              the recipe needs GPUs [0]; this machine has none" in result.out
    assert "NOT_COMPARABLE here: no GPU (the recipe runs on GPU 0; nvidia-smi finds none here); the record ran on" \
        in result.out  # fmt: skip
    assert "-m cloudvault.repro.gpu_smoke --device cuda --out" in result.out
    assert "settings compared: gpu, dtype, seed, max_new_tokens, model_config, torch, transformers" in result.out


@pytest.mark.usefixtures("torch_importable")
def test_the_dry_run_on_a_gpu_machine_names_the_gpu_it_uses(demo_catalog, vault, tmp_path, monkeypatch):
    from cloudvault.tools.gpu import Gpu

    monkeypatch.setattr("cloudvault.tools.gpu.local_gpus", lambda *a, **k: [Gpu(0, "NVIDIA H200", (9, 0), 4, 143_771)])
    result = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--dry-run", "--out", str(tmp_path))
    assert result.code == 0, result.out
    assert "GPU 0: NVIDIA H200, compute capability 9.0 (sm_90), 4 of 143771 MiB used" in result.out
    assert "ok   gpu              GPUs [0] free (memory.used < 500 MiB)" in result.out
    assert "NOT_COMPARABLE here" not in result.out


def test_the_dry_run_without_the_runners_modules_shows_the_plan_and_names_the_install(
    demo_catalog, vault, tmp_path, monkeypatch
):
    """The run would stop at once (exit 7) naming the pip install; the dry run says so as one preflight line, with
    the whole plan and every other check, and exits as the run would."""
    from cloudvault.tools.gpu import Gpu

    recipes = tmp_path / "recipes" / "repro"  # the shipped recipe, asking also for a module no machine has
    recipes.mkdir(parents=True)
    text = (REPO / "recipes/repro/gpu_greedy_smoke.toml").read_text()
    (recipes / "gpu_greedy_smoke.toml").write_text(text.replace('["torch", "transformers"]', '["vault_absent_mod"]'))
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "recipes"))
    monkeypatch.setattr("cloudvault.tools.gpu.local_gpus", lambda *a, **k: [Gpu(0, "NVIDIA H200", (9, 0), 4, 143_771)])
    result = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--dry-run", "--out", str(tmp_path / "runs"))
    assert result.code == 7, result.out + result.err
    assert "FAIL python           gpu_greedy_smoke needs vault_absent_mod, which" in result.out
    assert "install: pip install torch 'transformers>=5,<6'" in result.out
    assert "ok   gpu              GPUs [0] free" in result.out
    assert "-m cloudvault.repro.gpu_smoke --device cuda --out" in result.out
    assert not (tmp_path / "runs").exists()
    run = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--out", str(tmp_path / "runs"))
    assert run.code == 7 and "vault_absent_mod" in run.err and "Traceback" not in run.err


def test_the_runner_repeats_its_greedy_tokens_from_the_same_seed():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from cloudvault.repro.gpu_smoke import build_model, greedy, prompts

    docs = prompts()[:2]
    first = [greedy(build_model("cpu"), d["prompt_ids"], "cpu", max_new_tokens=6)["output_ids"] for d in docs]
    again = [greedy(build_model("cpu"), d["prompt_ids"], "cpu", max_new_tokens=6)["output_ids"] for d in docs]
    assert first == again and all(len(ids) == 6 for ids in first)
    assert first[0] != first[1]  # different prompts, different continuations


def test_a_cpu_run_against_a_gpu_record_is_not_comparable_on_the_gpu_setting(demo_mirror, vault, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    mirror = tmp_path / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    about = mirror / RECORDED / "run.json"
    doc = json.loads(about.read_text())
    doc["settings"]["gpu"] = "NVIDIA H200 (9.0)"
    about.write_text(json.dumps(doc))
    db = tmp_path / "catalog.db"
    assert vault("--catalog", str(db), "index", "--mirror", "marvell_cloud", "--quiet", str(mirror)).code == 0
    result = vault("--catalog", str(db), "repro", RECIPE, "--standin", "--out", str(tmp_path / "runs"), "--json")
    assert result.code == 10, result.err
    report = json.loads(result.out)
    assert report["verdict"] == "NOT_COMPARABLE"
    assert "setting gpu: 'NVIDIA H200 (9.0)' vs 'none (cpu)'" in report["reasons"]
    work = Path(report["folder"]) / "work"
    assert json.loads((work / "run.json").read_text())["settings"]["gpu"] == "none (cpu)"
    assert (work / "per_request.gpu0.csv").is_file() and (work / "per_request.csv").is_file()


def test_the_runner_writes_a_record_folder_or_per_gpu_files(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    done = subprocess.run([sys.executable, "-m", "cloudvault.repro.gpu_smoke", "--out", str(tmp_path / "g"),
                           "--device", "cpu", "--gpu", "3"], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in (tmp_path / "g").iterdir())
    assert names == ["per_request.gpu3.csv", "requests.gpu3.jsonl", "run.gpu3.json"]
    stream = [json.loads(line) for line in (tmp_path / "g/requests.gpu3.jsonl").read_text().splitlines()]
    assert [r["request"] for r in stream][:2] == ["p0-016@gpu3", "p1-032@gpu3"]
    for r in stream:  # TTFT/TPOT/E2E from the three timestamps, in order
        assert r["t_start"] <= r["t_first"] <= r["t_done"] and len(r["top2_margin"]) == len(r["output_ids"])
    cuda = subprocess.run([sys.executable, "-m", "cloudvault.repro.gpu_smoke", "--out", str(tmp_path / "c")],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    import torch

    if not torch.cuda.is_available():
        assert cuda.returncode == 6 and "torch sees no GPU" in cuda.stderr


def test_the_gpu_bound_record_is_three_h200_repetitions_with_identical_outputs():
    from cloudvault.repro.recipe import load

    tree = REPO / "recipes/repro"
    recipe = load(str(tree / "gpu_bound_decode.toml"))
    assert recipe.repetitions() == ["gpu_bound_decode/rep2", "gpu_bound_decode/rep3"]
    assert recipe.noise_floors() == dict.fromkeys(("ttft", "tpot", "e2e", "throughput"), 0.05)
    reps = [tree / "recorded/gpu_bound_decode" / f"rep{i}" for i in (1, 2, 3)]
    runs = [results.parse(results.read_folder(r)) for r in reps]
    assert all(len(rows) == 9 for rows in runs)
    assert runs[0].keys() == runs[1].keys() == runs[2].keys()
    assert all(runs[0][k]["output_ids"] == rows[k]["output_ids"] for rows in runs[1:] for k in runs[0])
    about = json.loads((reps[0] / "run.json").read_text())["settings"]
    assert (about["gpu"], about["dtype"], about["profile"]) == ("NVIDIA H200 (9.0)", "bfloat16", "bound")
    assert json.loads(about["model_config"])["hidden_size"] == 8192


def test_a_bad_noise_floor_is_refused(tmp_path):
    from cloudvault.errors import RecipeInvalid
    from cloudvault.repro.recipe import load

    text = (REPO / "recipes/repro/gpu_bound_decode.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("noise = 0.05 ", "noise = { tpot = 0.05, latency = 0.1 }"))
    with pytest.raises(RecipeInvalid, match="timings.noise"):
        load(str(bad))


def test_each_profile_builds_the_model_its_shipped_record_was_made_with():
    """The configs are the records' settings: BOUND_CONFIG derived from MODEL_CONFIG must stay what rep1 ran."""
    from cloudvault.repro import gpu_smoke

    tree = REPO / "recipes/repro/recorded"
    for profile, record in (("smoke", "gpu_greedy_smoke"), ("bound", "gpu_bound_decode/rep1")):
        about = json.loads((tree / record / "run.json").read_text())["settings"]
        assert about["model_config"] == json.dumps(gpu_smoke.PROFILES[profile]["config"], sort_keys=True)
