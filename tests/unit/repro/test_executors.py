"""The repro executors on paper, without a service: the sbatch script (one array task per GPU process), scontrol's
task ranges, the failed task's log tail, docker's mounts (the mirror read-only), executor checks replacing local
ones, an unreachable daemon and an image built for another GPU arch failing the preflight."""

from __future__ import annotations

import os
from pathlib import Path

from cloudvault.repro import plan as planning
from cloudvault.repro.executors import with_executor_checks
from cloudvault.repro.executors.docker import DockerExecutor, mounts_for
from cloudvault.repro.executors.slurm import log_tail, render
from cloudvault.repro.preflight import Check
from cloudvault.repro.recipe import load
from cloudvault.tools.slurm import task_range

RECIPE = "014_ss20_temp0"


def plan_for(db: Path, run_dir: Path, standin: bool = True) -> planning.Plan:
    from cloudvault.catalog.db import open_catalog

    conn = open_catalog(db, readonly=True)
    try:
        return planning.build(conn, load(RECIPE), run_dir, planning.RunOptions(run_dir.parent, True, standin))
    finally:
        conn.close()


def test_the_sbatch_script_has_one_array_task_per_gpu_process(demo_catalog, tmp_path):
    plan = plan_for(demo_catalog, tmp_path / "run", standin=False)
    script = render(plan, "h200")
    assert "#SBATCH --array=0-7" in script and "#SBATCH --partition=h200" in script
    assert "#SBATCH --gres=gpu:1" in script and "#SBATCH --cpus-per-task=24" in script
    assert script.count(") name=gpu") == 8 and "--gpu 7 " in script
    assert "CUDA_VISIBLE_DEVICES" not in script  # Slurm gives each task its GPU
    assert "LOG_SS=1" in script and f"{tmp_path / 'run' / 'logs'}/gpu3.err" in script
    standin = render(plan_for(demo_catalog, tmp_path / "run2"))
    assert "--gres" not in standin and "#SBATCH --cpus-per-task=1" in standin and "--mem=1G" in standin
    assert "#SBATCH --partition" not in standin  # Slurm's default partition


def test_array_task_ranges_as_scontrol_prints_them():
    assert task_range("3") == [3]
    assert task_range("2-5%2") == [2, 3, 4, 5]
    assert task_range("0,3-4") == [0, 3, 4]


def test_the_log_tail_is_the_last_lines_of_the_failed_task(tmp_path):
    (tmp_path / "gpu1.err").write_text("a\nb\nc\nValueError: bad\n")
    assert log_tail(tmp_path, "gpu1") == "b | c | ValueError: bad"
    assert log_tail(tmp_path, "gpu2") == "(no log output)"


def test_docker_mounts_the_mirror_read_only_and_the_run_folder_read_write(demo_catalog, demo_mirror, tmp_path):
    plan = plan_for(demo_catalog, tmp_path / "run")
    mounts = mounts_for(plan)
    mirror = os.path.realpath(plan.mirror_root)
    assert mounts[mirror] == (mirror, "ro") and mounts[str(tmp_path / "run")] == (str(tmp_path / "run"), "rw")
    assert mounts["/usr"] == ("/usr", "ro")  # the stand-in's C library
    line = DockerExecutor(image="img:1").describe(plan)[0]
    assert line.startswith("gpu0: docker run --rm --network none ") and f"-v {mirror}:{mirror}:ro" in line


def test_an_executor_check_replaces_the_local_one_of_the_same_name():
    class Remote:
        def preflight(self, plan):
            return [Check("gpu", True, "the partition has GPUs")]

    local = [Check("gpu", False, "this machine has none"), Check("output", True, "x")]
    merged = with_executor_checks(local, Remote(), None)
    assert merged == [Check("output", True, "x"), Check("gpu", True, "the partition has GPUs")]


def test_an_unreachable_docker_daemon_fails_the_preflight_naming_it(demo_catalog, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    (check,) = DockerExecutor(image="x:1").preflight(plan_for(demo_catalog, tmp_path / "run"))
    assert not check.ok and check.name == "docker" and f"{tmp_path}/none.sock" in check.detail


def test_an_image_built_for_sm_120_does_not_fit_the_h200_the_plan_uses(demo_catalog, tmp_path, monkeypatch):
    from cloudvault.repro.executors.docker import _arch_check
    from cloudvault.tools.gpu import Gpu

    h200 = [Gpu(i, "NVIDIA H200", (9, 0), 0, 143_771) for i in range(8)]
    monkeypatch.setattr("cloudvault.tools.gpu.local_gpus", lambda *a, **k: h200)
    plan = plan_for(demo_catalog, tmp_path / "run", standin=False)
    image = {"Config": {"Env": ["PATH=/usr/bin", "TORCH_CUDA_ARCH_LIST=12.0"]}}
    check = _arch_check(plan, image, None)
    assert not check.ok and check.detail == "image is built for sm_120; GPU 0 (NVIDIA H200) is sm_90"
    fits = _arch_check(plan, {"Config": {"Env": ["TORCH_CUDA_ARCH_LIST=9.0 12.0"]}}, None)
    assert fits.ok and "fits GPUs [0, 1, 2, 3, 4, 5, 6, 7]" in fits.detail
    assert _arch_check(plan_for(demo_catalog, tmp_path / "r2"), image, None).detail == "no GPU used"


def test_detach_needs_slurm(demo_catalog, vault, tmp_path):
    result = vault("--catalog", str(demo_catalog), "repro", RECIPE, "--standin", "--detach", "--out", str(tmp_path))
    assert result.code == 2 and "--detach needs --executor slurm" in result.err
