"""Preflight checks one by one, with the GPUs faked where this machine has none: busy GPU (the lab's 500 MiB
contract), an image built for another GPU arch, a volatile output folder, instrumentation that differs; and a
run whose process fails is recorded as failed."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from conftest import REPO

from cloudvault.catalog.db import open_catalog
from cloudvault.repro import plan as planning
from cloudvault.repro.preflight import run_checks
from cloudvault.repro.recipe import load
from cloudvault.tools.gpu import Gpu

RECIPE = REPO / "recipes/repro/014_ss20_temp0.toml"


def user_recipe(tmp_path: Path, monkeypatch, name: str, text: str) -> None:
    (tmp_path / "recipes/repro").mkdir(parents=True, exist_ok=True)
    (tmp_path / f"recipes/repro/{name}.toml").write_text(text)
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "recipes"))


def checks_for(db: Path, recipe: str, run_dir: Path, **kw) -> dict:
    conn = open_catalog(db)
    plan = planning.build(conn, load(recipe), run_dir, planning.RunOptions(run_dir.parent, **kw))
    return {c.name: c for c in run_checks(conn, plan, False)}


def fake_gpus(monkeypatch, used_mib: int, cap=(12, 0), name="NVIDIA RTX PRO 6000 Blackwell") -> None:
    gpus = [Gpu(i, name, cap, used_mib if i == 3 else 2, 97_887) for i in range(8)]
    monkeypatch.setattr("cloudvault.tools.gpu.local_gpus", lambda *a, **k: gpus)


@pytest.mark.parametrize(("used", "ok"), [(499, True), (500, False)])
def test_a_gpu_using_500_mib_or_more_is_busy(demo_catalog, tmp_path, monkeypatch, used, ok):
    fake_gpus(monkeypatch, used)
    gpu = checks_for(demo_catalog, "014_ss20_temp0", tmp_path / "run")["gpu"]
    assert gpu.ok is ok
    if not ok:
        assert gpu.detail.startswith("GPU 3 uses 500 MiB (must be under 500 MiB")


def test_an_image_built_for_sm_120_does_not_fit_an_h200(demo_catalog, tmp_path, monkeypatch):
    from cloudvault.catalog.records import record_restore

    text = RECIPE.read_text().replace('env_recipe = "nebius"                      # vault restore env nebius\n'
                                      'env_name = "sparsespec"', 'docker = "tandemspec"')  # fmt: skip
    user_recipe(tmp_path, monkeypatch, "in_docker", text)
    conn = open_catalog(demo_catalog)
    record_restore(conn, kind="docker", mirror_id=None, entry_id="_docker", name="tandemspec", source="x",
                   source_hash=None, target="sha256:1457", status="ok", detail={}, started_at="2026-12-03")  # fmt: skip
    fake_gpus(monkeypatch, 0, cap=(9, 0), name="NVIDIA H200")
    env = checks_for(demo_catalog, "in_docker", tmp_path / "run")["environment"]
    assert (env.ok, env.detail) == (False, "image 'tandemspec' is built for sm_120; GPU 0 (NVIDIA H200) is sm_90")
    fake_gpus(monkeypatch, 0)
    assert checks_for(demo_catalog, "in_docker", tmp_path / "run2")["environment"].ok


def test_output_folders_that_vanish_are_refused_unless_chosen(demo_catalog, tmp_path, monkeypatch):
    assert not checks_for(demo_catalog, "014_ss20_temp0", Path("/tmp/x/run"), standin=True)["output"].ok
    monkeypatch.setenv("RUNPOD_POD_ID", "abc")
    assert not checks_for(demo_catalog, "014_ss20_temp0", Path("/root/runs/r"), standin=True)["output"].ok
    monkeypatch.delenv("RUNPOD_POD_ID")
    assert checks_for(demo_catalog, "014_ss20_temp0", Path("/root/runs/r"), standin=True)["output"].ok


def test_the_recorded_instrumentation_is_what_the_run_gets(demo_catalog, tmp_path):
    checks = checks_for(demo_catalog, "014_ss20_temp0", tmp_path / "r", standin=True)
    assert checks["instrumentation"].detail == "LOG_SS=1, SSPEC_REQ_TIMING=1, SSPEC_FIXED_OUTPUT=8192"
    off = checks_for(demo_catalog, "014_ss20_temp0", tmp_path / "r", standin=True,
                     env_overrides={"SSPEC_REQ_TIMING": "0"})  # fmt: skip
    assert not off["instrumentation"].ok


def test_a_failing_process_is_recorded_as_failed(demo_catalog, vault, tmp_path, monkeypatch):
    text = (REPO / "recipes/repro/016_plots.toml").read_text()
    user_recipe(tmp_path, monkeypatch, "broken", text.replace('args = "plot_tps.py"', 'args = "no_such_script.py"'))
    result = vault("--catalog", str(demo_catalog), "repro", "broken", "--out", str(tmp_path / "runs"))
    assert result.code == 6
    assert "broken: 1 of 1 processes failed (exit codes [2]); logs in" in result.err
    (folder,) = (tmp_path / "runs").iterdir()
    assert "no_such_script.py" in (folder / "logs/run.err").read_text()
    prov = json.loads((folder / "provenance.json").read_text())
    assert prov["status"] == "failed" and prov["exit_codes"] == {"run": 2}
    runs = vault("--catalog", str(demo_catalog), "runs", "016", "--json")
    assert [(r["status"], r["verdict"]) for r in json.loads(runs.out)] == [("failed", None)]


def test_a_run_folder_inside_the_mirror_is_refused(demo_catalog, demo_mirror, vault):
    result = vault("--catalog", str(demo_catalog), "repro", "016_plots", "--out", str(demo_mirror / "runs"))
    assert result.code == 2
    assert "is inside the mirror" in result.err and "vault never writes into a mirror" in result.err
    assert not (demo_mirror / "runs").exists()


def test_every_registered_executor_implements_the_interface():
    from cloudvault.repro.executors import EXECUTORS

    for name, where in EXECUTORS.items():
        module, _, cls = where.partition(":")
        klass = getattr(importlib.import_module(module), cls)
        assert all(callable(getattr(klass, m, None)) for m in ("describe", "submit", "wait", "collect", "cancel")), name


def test_out_must_be_a_folder(demo_catalog, vault, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = vault("--catalog", str(demo_catalog), "repro", "016_plots", "--out", str(afile))
    assert (result.code, result.err.strip()) == (2, f"vault: error: {afile} is not a folder; --out names the folder "
                                                    "that run folders go under")  # fmt: skip
    result = vault("--catalog", str(demo_catalog), "compare", "014", "014", "--out", str(afile))
    assert result.code == 2 and "is not a folder" in result.err
