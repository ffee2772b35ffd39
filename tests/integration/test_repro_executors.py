"""`vault repro --executor docker|slurm` against a real dockerd and a real single-node Slurm (as .ci/services/*.sh
start them): the 014 stand-in gives the same verdict on local, docker and slurm; a failing Slurm job is recorded
failed with its state and log tail; Ctrl-C cancels the job (squeue shows it gone); --detach then `vault runs`
collects; inside a container the mirror cannot be written. (The executors' units, which need no
service, are tests/unit/repro/test_executors.py.)

The docker test image is busybox only (docker import of a one-binary rootfs, /lib -> usr/lib); the stand-in's
Python comes from the host, mounted read-only by the executor (its prefix, the cloudvault package, /usr).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest import REPO, require
from unit.repro.test_executors import RECIPE, plan_for

from cloudvault.repro import plan as planning
from cloudvault.repro.executors.docker import DockerExecutor
from cloudvault.repro.executors.slurm import SlurmExecutor
from cloudvault.repro.preflight import Check
from integration.test_restore_docker import daemon_held, services  # noqa: F401  (the test dockerd, started as CI starts it)

TEST_IMAGE = "vault-test/pyhost:1"


@pytest.fixture(scope="module")
def slurm() -> str:
    """SLURM_CONF of a Slurm that answers: the one .ci/services/slurm.sh started (VAULT_TEST_SLURM), or one already
    running here; none: skip, but fail under CI."""
    require("sbatch")
    answers = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True).returncode == 0
    if not answers:
        if os.environ.get("CI") == "true" or os.environ.get("VAULT_TEST_SLURM"):
            pytest.fail("Slurm does not answer (sinfo); .ci/services/slurm.sh should have started it")
        pytest.skip("no Slurm running (start one: CI_SERVICES=$(mktemp -d) . .ci/services/slurm.sh)")
    return os.environ.get("SLURM_CONF", "")


@pytest.fixture
def docker_host(services, tmp_path_factory):  # noqa: F811
    """DOCKER_HOST of the test daemon (.ci/services/docker.sh), held by this test alone (the restore tests of
    another worker clear its images), with the busybox test image imported."""
    host = services["VAULT_TEST_DOCKER_HOST"]
    with daemon_held(host):
        import_test_image(host, tmp_path_factory.mktemp("rootfs"))
        yield host


def import_test_image(host: str, folder: Path) -> None:
    """busybox as /bin/sh, /lib and /lib64 pointing into /usr (where the host's libraries get mounted)."""
    busybox = require("busybox")
    layer = folder / "rootfs.tar"
    with tarfile.open(layer, "w") as tar:
        tar.add(busybox, "bin/busybox")
        for name, target in (("bin/sh", "busybox"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        for name in ("usr", "tmp"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
    with open(layer, "rb") as fh:
        subprocess.run(["docker", "-H", host, "import", "-", TEST_IMAGE], stdin=fh, check=True, capture_output=True)


def runs_json(vault, db: Path, *args: str) -> list[dict]:
    result = vault("--catalog", str(db), "runs", *args, "--json")
    return json.loads(result.out) if result.out.strip() else []


def repro(vault, db: Path, out: Path, *args: str):
    return vault("--catalog", str(db), "repro", RECIPE, "--standin", "--out", str(out), *args)


def test_the_014_standin_gives_the_same_verdict_on_local_docker_and_slurm(demo_catalog, vault, tmp_path, slurm,
                                                                          docker_host, monkeypatch):  # fmt: skip
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    local = repro(vault, demo_catalog, tmp_path / "local")
    docker = repro(vault, demo_catalog, tmp_path / "docker", "--executor", "docker", "--image", TEST_IMAGE)
    batch = repro(vault, demo_catalog, tmp_path / "slurm", "--executor", "slurm")
    for result in (local, docker, batch):
        assert result.code == 0, result.err
        assert "REPRODUCED: outputs 24/24 identical" in result.out
    recorded = {r["executor"]: r for r in runs_json(vault, demo_catalog, "014")}
    assert {k: (r["status"], r["verdict"]) for k, r in recorded.items()} == {
        e: ("finished", "REPRODUCED") for e in ("local", "docker", "slurm")}  # fmt: skip
    assert recorded["slurm"]["job_id"].isdigit() and len(recorded["docker"]["job_id"].split(",")) == 8
    per_request = {e: vault("--catalog", str(demo_catalog), "runs", "--requests", r["run_id"]).out
                   for e, r in recorded.items()}  # fmt: skip
    assert per_request["local"] == per_request["docker"] == per_request["slurm"] and per_request["local"].count(
        "identical") == 24  # fmt: skip
    slurm_dir = Path(recorded["slurm"]["folder"])
    assert "#SBATCH --array=0-7" in (slurm_dir / "job.sbatch").read_text()
    assert (slurm_dir / "logs/gpu7.exit").read_text().strip() == "0" and "670bf1c4" in (
        slurm_dir / "logs/gpu7.out").read_text()  # fmt: skip
    assert "670bf1c4" in (Path(recorded["docker"]["folder"]) / "logs/gpu7.out").read_text()


def test_a_failing_slurm_job_is_recorded_failed_with_its_state_and_log_tail(demo_catalog, vault, tmp_path, slurm):
    result = repro(vault, demo_catalog, tmp_path, "--executor", "slurm", "--env", "VAULT_STANDIN_DIVERGE=66ec:bad")
    assert result.code == 6
    assert "slurm job" in result.err and "8 of 8 task(s) failed (exit codes [1])" in result.err
    assert "ValueError: invalid literal for int() with base 10: 'bad'" in result.err  # the log tail
    (run,) = runs_json(vault, demo_catalog, "014")
    assert run["status"] == "failed" and run["verdict"] is None
    summary = json.loads(run["summary"]) if isinstance(run["summary"], str) else run["summary"]
    assert "FAILED" in summary["error"] and "ValueError" in summary["error"]


def test_ctrl_c_during_a_slurm_run_cancels_the_job(demo_catalog, tmp_path, slurm):
    from cloudvault.catalog.db import open_catalog
    from cloudvault.catalog.records import runs

    out = tmp_path / "runs"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "cloudvault", "--catalog", str(demo_catalog), "repro", RECIPE, "--standin",
            "--executor", "slurm", "--env", "VAULT_STANDIN_DELAY=60", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    job_id, deadline = None, time.monotonic() + 60
    while time.monotonic() < deadline and not (job_id and list(out.glob("*/logs/gpu0.out"))):
        found = runs(open_catalog(demo_catalog, readonly=True))
        job_id = found[0].job_id if found else None
        time.sleep(0.2)
    assert job_id, "the job id was never recorded"
    assert subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True).stdout.strip()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    gone = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True)
    assert gone.stdout.strip() == ""
    (run,) = runs(open_catalog(demo_catalog, readonly=True))
    assert (run.status, run.job_id) == ("interrupted", job_id)


def test_detach_returns_at_once_and_vault_runs_collects_later(demo_catalog, vault, tmp_path, slurm):
    result = repro(vault, demo_catalog, tmp_path, "--executor", "slurm", "--detach", "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["status"] == "queued" and doc["job_id"].isdigit()
    (queued,) = runs_json(vault, demo_catalog, "014")
    assert (queued["run_id"], queued["job_id"]) == (doc["run_id"], doc["job_id"])
    seen, deadline = {queued["status"]}, time.monotonic() + 180
    while time.monotonic() < deadline:
        (run,) = runs_json(vault, demo_catalog, "collect", "014")  # each collect asks Slurm about the job
        seen.add(run["status"])
        if run["status"] not in ("queued", "running"):
            break
        time.sleep(1)
    assert (run["status"], run["verdict"]) == ("finished", "REPRODUCED")
    assert "running" in seen and seen <= {"queued", "running", "finished"}  # 8 tasks on 2 cores: about 10 s
    folder = Path(run["folder"])
    assert "REPRODUCED: outputs 24/24 identical" in (folder / "REPORT.md").read_text()
    assert json.loads((folder / "provenance.json").read_text())["status"] == "finished"


def test_inside_a_container_the_mirror_is_read_only_and_there_is_no_network(demo_catalog, tmp_path, docker_host,
                                                                            monkeypatch):  # fmt: skip
    import docker

    monkeypatch.setenv("DOCKER_HOST", docker_host)
    plan = plan_for(demo_catalog, tmp_path / "run")
    mirror, work = os.path.realpath(plan.mirror_root), plan.run_dir / "work"
    script = (f"touch {mirror}/intruder; echo mirror_rc=$?; echo written > {work}/ok.txt; echo work_rc=$?; "
              "grep -c : /proc/net/dev")  # fmt: skip
    shell = planning.Process("probe", ["/bin/sh", "-c", script], {}, None, [], str(work))
    plan = plan._replace(processes=[shell])
    executor = DockerExecutor(image=TEST_IMAGE)
    job = executor.submit(plan)
    assert executor.wait(job) == [0]
    executor.collect(job)
    log = (plan.run_dir / "logs/probe.out").read_text()
    assert "Read-only file system" in (plan.run_dir / "logs/probe.err").read_text()
    assert "mirror_rc=1" in log and "work_rc=0" in log
    assert log.strip().splitlines()[-1] == "1"  # /proc/net/dev lists one interface ("lo:"): no network
    assert not Path(mirror, "intruder").exists() and (work / "ok.txt").read_text() == "written\n"
    client = docker.APIClient(base_url=docker_host, version="auto")
    assert client.containers(all=True, filters={"label": f"cloudvault.run={plan.run_dir.name}"}) == []


def test_a_failing_container_is_recorded_failed_and_removed(demo_catalog, vault, tmp_path, docker_host, monkeypatch):
    import docker

    monkeypatch.setenv("DOCKER_HOST", docker_host)
    result = repro(vault, demo_catalog, tmp_path, "--executor", "docker", "--image", TEST_IMAGE, "--env",
                   "VAULT_STANDIN_DIVERGE=66ec:bad")  # fmt: skip
    assert result.code == 6 and "8 of 8 processes failed (exit codes [1])" in result.err
    (run,) = runs_json(vault, demo_catalog, "014")
    assert run["status"] == "failed"
    assert "ValueError" in (Path(run["folder"]) / "logs/gpu0.err").read_text()
    client = docker.APIClient(base_url=docker_host, version="auto")
    assert client.containers(all=True, filters={"label": f"cloudvault.run={Path(run['folder']).name}"}) == []


def test_a_missing_image_is_restored_from_the_mirror_first(demo_catalog, vault, tmp_path, docker_host, monkeypatch):
    """[environment] docker = "neo": the demo's image (no program in it: the stand-in is mounted into it), loaded
    from _docker/images/neo.tar.zst."""
    import re

    import docker

    monkeypatch.setenv("DOCKER_HOST", docker_host)
    client = docker.APIClient(base_url=docker_host, version="auto")
    tag = "junhyeong0724/marvell-tandemspec:neo"
    if client.images(name=tag):
        client.remove_image(tag, force=True)
    text = (REPO / "recipes/repro/014_ss20_temp0.toml").read_text()
    (tmp_path / "recipes/repro").mkdir(parents=True)
    (tmp_path / "recipes/repro/014_in_neo.toml").write_text(
        re.sub(r"\[environment\]\n(.*\n)*?\n", '[environment]\ndocker = "neo"\n\n', text, count=1))  # fmt: skip
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "recipes"))
    argv = ["--catalog", str(demo_catalog), "repro", "014_in_neo", "--standin", "--executor", "docker"]
    dry = vault(*argv, "--dry-run", "--out", str(tmp_path / "runs"))
    assert f"ok   image            {tag} missing; restored from _docker/images/neo.tar.zst first" in dry.out
    result = vault(*argv, "--out", str(tmp_path / "runs"))
    assert result.code == 0, result.err
    assert "REPRODUCED: outputs 24/24 identical" in result.out
    assert client.images(name=tag)
    from cloudvault.catalog.db import open_catalog
    from cloudvault.catalog.records import restores

    (restored,) = restores(open_catalog(demo_catalog, readonly=True), kind="docker")
    assert (restored.name, restored.status, restored.source) == ("neo", "ok", "_docker/images/neo.tar.zst")


def test_the_slurm_preflight_asks_sinfo_for_the_partition_and_its_gpus(demo_catalog, tmp_path, slurm):
    gpu_plan = plan_for(demo_catalog, tmp_path / "run", standin=False)
    checks = {c.name: c for c in SlurmExecutor("debug").preflight(gpu_plan)}
    assert checks["slurm"] == Check("slurm", True, "sinfo answers; partition debug exists")
    assert not checks["gpu"].ok and "partition debug has no GPUs" in checks["gpu"].detail
    assert "8 task(s) want one each" in checks["gpu"].detail
    (missing,) = SlurmExecutor("nope").preflight(gpu_plan)
    assert not missing.ok and "partition 'nope' does not exist" in missing.detail
    standin = {c.name: c.ok for c in SlurmExecutor("debug").preflight(plan_for(demo_catalog, tmp_path / "r2"))}
    assert standin == {"slurm": True, "gpu": True}


def test_ctrl_c_during_a_docker_run_stops_and_removes_the_containers(demo_catalog, tmp_path, docker_host):
    import docker
    from cloudvault.catalog.db import open_catalog
    from cloudvault.catalog.records import runs

    out = tmp_path / "runs"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path), "DOCKER_HOST": docker_host}
    argv = [sys.executable, "-m", "cloudvault", "--catalog", str(demo_catalog), "repro", RECIPE, "--standin",
            "--executor", "docker", "--image", TEST_IMAGE, "--env", "VAULT_STANDIN_DELAY=60"]  # fmt: skip
    proc = subprocess.Popen([*argv, "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    client = docker.APIClient(base_url=docker_host, version="auto")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(client.containers(filters={"label": "cloudvault.process"})) < 8:
        time.sleep(0.2)
    assert len(client.containers(filters={"label": "cloudvault.process"})) == 8
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 15  # all at once (one by one, with the 5 s grace each, took over 40 s)
    assert client.containers(all=True, filters={"label": "cloudvault.process"}) == []
    (run,) = runs(open_catalog(demo_catalog, readonly=True))
    assert (run.executor, run.status) == ("docker", "interrupted")


def test_vault_runs_lists_a_detached_run_it_cannot_ask_slurm_about(demo_catalog, vault, tmp_path, slurm, monkeypatch):
    result = repro(vault, demo_catalog, tmp_path, "--executor", "slurm", "--detach", "--json")
    job_id = json.loads(result.out)["job_id"]
    try:
        monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-such-slurm.conf"))
        listed = vault("--catalog", str(demo_catalog), "runs", "collect", "014")
        assert listed.code == 0 and f"(Slurm job {job_id})" in listed.out
        assert "cannot collect" in listed.err and "Slurm does not answer" in listed.err
        assert runs_json(vault, demo_catalog, "014")[0]["status"] == "queued"
    finally:
        monkeypatch.undo()
        subprocess.run(["scancel", job_id], capture_output=True)
