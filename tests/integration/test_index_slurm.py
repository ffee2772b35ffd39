"""`vault index --slurm` on a real single-node Slurm (.ci/services/slurm.sh: VAULT_TEST_SLURM=1, SLURM_CONF): the
array of tasks and the merge job leave the catalog a local index leaves; a cancelled or scancel'd task loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from archives import compress, gnu_tar
from cli.test_index_slurm import _local_catalog, _mirror, _rows, _write_plan, catalog_rows
from conftest import require

from cloudvault.index.slurm import Layout

pytestmark = pytest.mark.slurm


def _slurm() -> None:
    require("sbatch")
    if not (os.environ.get("VAULT_TEST_SLURM") and os.environ.get("SLURM_CONF")):
        if os.environ.get("CI") == "true":
            pytest.fail("Slurm is required in CI (.ci/services/slurm.sh)")
        pytest.skip("no Slurm here (source .ci/services/slurm.sh)")


def _status(vault, db: Path) -> dict:
    r = vault("--catalog", str(db), "index", "slurm", "status", "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def _wait_for(vault, db: Path, done, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc = _status(vault, db)
        if done(doc):
            return doc
        time.sleep(0.5)
    raise AssertionError(f"Slurm did not get there in {timeout} s: {doc}")


def test_slurm_3_tasks_then_the_merge_job_give_the_local_catalog_of_the_demo_mirror(demo_mirror, tmp_path, vault):
    _slurm()
    mirror = demo_mirror
    named = ("--mirror", "marvell_cloud")  # its manifest, entry pattern and secret rules travel in the plan
    r = vault("--catalog", str(tmp_path / "local.db"), "index", "--json", *named, str(mirror))
    local = catalog_rows(tmp_path / "local.db")
    assert r.code == 0 and len(local["archives"]) >= 10 and json.loads(r.out)["flags"]["secret"] >= 1
    db = tmp_path / "c.db"
    plan = ["index", "slurm", "plan", "--tasks", "3", "--partition", "debug", "--json"]
    r = vault("--catalog", str(db), *plan, *named, str(mirror))
    assert r.code == 0, r.err
    jobs = json.loads(r.out)
    assert jobs["tasks"] == [0, 1, 2] and jobs["array"].isdigit() and jobs["merge"].isdigit()
    running = _status(vault, db)  # while it runs: the merge waits on the array
    assert len(running["tasks"]) == 3 and running["merge_state"].startswith(("PENDING", "RUNNING", "merged"))
    text = vault("--catalog", str(db), "index", "slurm", "status").out
    assert f"array job {jobs['array']}, merge job {jobs['merge']}" in text
    busy = vault("--catalog", str(db), "index", "slurm", "resume")  # nothing to resume while it runs; its merge is kept
    assert busy.code == 6 and f"Slurm job {jobs['array']} of this catalog's index is still" in busy.err
    doc = _wait_for(vault, db, lambda d: d["merge_state"].startswith(("merged", "COMPLETED", "FAILED", "CANCEL")))
    assert doc["merge_state"].startswith("merged"), doc
    assert all(t["state"] == "merged" for t in doc["tasks"])
    assert catalog_rows(db) == local
    again = vault("--catalog", str(db), "index", "slurm", "plan", "--tasks", "3", str(mirror))
    assert again.code == 0 and "nothing for Slurm" in again.out


def test_a_cancelled_task_leaves_the_merge_undone_and_resume_completes_it(tmp_path, vault):
    _slurm()
    mirror = _mirror(tmp_path)
    local = _local_catalog(vault, mirror, tmp_path / "local.db")
    db = tmp_path / "c.db"
    jobs = json.loads(vault("--catalog", str(db), "index", "slurm", "plan", "--tasks", "3", "--json", str(mirror)).out)
    # 2 cores, one per task: one task is still pending now; cancel it
    pending = subprocess.run(["squeue", "-h", "-r", "-t", "PD", "-j", jobs["array"], "-o", "%K"],
                             capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert pending, "no task of the array was pending"
    victim = int(pending[-1])
    subprocess.run(["scancel", f"{jobs['array']}_{victim}"], check=True)
    doc = _wait_for(vault, db, lambda d: not d["merge_state"].startswith("PENDING (Dependency)")
                    and all(t["state"] == "done" for t in d["tasks"] if t["task"] != victim))  # fmt: skip
    assert not doc["merge_state"].startswith(("merged", "COMPLETED")), doc
    assert [t["state"] for t in doc["tasks"] if t["task"] == victim][0] != "done"
    assert catalog_rows(db)["archives"] == []  # the merge never ran
    r = vault("--catalog", str(db), "index", "slurm", "resume", "--json")
    assert r.code == 0, r.err
    resumed = json.loads(r.out)
    assert resumed["tasks"] == [victim] and resumed["merge"] != jobs["merge"]
    doc = _wait_for(vault, db, lambda d: d["merge_state"].startswith(("merged", "COMPLETED", "FAILED", "CANCEL")))
    assert doc["merge_state"].startswith("merged"), doc
    assert catalog_rows(db) == _rows(local)


def test_a_task_stopped_by_scancel_leaves_no_shard_and_no_scratch_file(tmp_path):
    root = tmp_path / "m" / "018_big" / "data"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "dump.bin").write_bytes(os.urandom(48 << 20))
    gnu_tar(tmp_path / "src", tmp_path / "big.tar", "gnu")
    root.mkdir(parents=True)
    compress(tmp_path / "big.tar", root / "big.tar.zst", "python")  # many frames: scanned in ~0.5 s or more
    db = tmp_path / "c.db"
    _write_plan(db, tmp_path / "m", 1)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    task = subprocess.Popen([sys.executable, "-m", "cloudvault.index.slurm_task", str(Layout(db).plan), "0"],
                            env={**os.environ, "TMPDIR": str(scratch)}, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 30
    while not list(scratch.glob("vault-shard-*")) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list(scratch.glob("vault-shard-*")), "the task never opened its scratch shard"
    task.terminate()  # what scancel sends first
    _, err = task.communicate(timeout=30)
    assert task.returncode == 128 + 15 and "Traceback" not in err, err
    assert list(scratch.iterdir()) == [] and not Layout(db).shard(0).exists()
