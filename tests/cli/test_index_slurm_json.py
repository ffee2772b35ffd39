"""`vault index slurm plan | status | resume | merge` with --json: each mode's document is its typed result's
to_json(), documented field by field in docs/commands/index.md (a real run is the snapshot). Slurm here is small
scripts on PATH: sbatch answering a job id, scontrol saying the array is pending (the tasks are run by hand)."""

from __future__ import annotations

import json

import pytest

from tests.cli.json_shapes import check
from tests.cli.test_index_slurm import _mirror, _run_tasks

FAKE = {
    "sbatch": "echo $((4200 + $(ls \"$(dirname \"${@: -1}\")\" | wc -l)))",
    "scontrol": 'echo "JobId=$4 ArrayJobId=$4 ArrayTaskId=0-63 JobState=PENDING Reason=Priority ExitCode=0:0"',
    "sacct": "exit 1",
}


@pytest.fixture
def fake_slurm(fake_commands):
    fake_commands(FAKE)


def test_every_slurm_mode_json_is_the_documented_shape(tmp_path, vault, fake_slurm):
    mirror = _mirror(tmp_path)
    db = tmp_path / "c.db"
    dry = vault("--catalog", str(db), "index", "slurm", "plan", "--tasks", "2", "--dry-run", "--json", str(mirror))
    assert dry.code == 0, dry.err
    check(json.loads(dry.out), "index.md", "--slurm N --dry-run")
    submitted = vault("--catalog", str(db), "index", "slurm", "plan", "--tasks", "2", "--json", str(mirror))
    assert submitted.code == 0, submitted.err
    doc = json.loads(submitted.out)
    check(doc, "index.md", "--slurm N")
    status = vault("--catalog", str(db), "index", "slurm", "status", "--json")
    assert status.code == 0, status.err
    check(json.loads(status.out), "index.md", "--status")
    _run_tasks(db, json.loads((tmp_path / "c.db.slurm/plan.json").read_text()))
    merged = vault("--catalog", str(db), "index", "slurm", "merge", "--json")
    assert merged.code == 5, merged.err  # the mirror's flagged members
    check(json.loads(merged.out), "index.md", "--merge")
    again = vault("--catalog", str(db), "index", "slurm", "merge", "--json")
    check(json.loads(again.out), "index.md", "--merge")
    resumed = vault("--catalog", str(db), "index", "slurm", "resume", "--json")
    assert resumed.code == 0, resumed.err
    check(json.loads(resumed.out), "index.md", "--resume")
    after = vault("--catalog", str(db), "index", "slurm", "status", "--json")
    check(json.loads(after.out), "index.md", "--status")
