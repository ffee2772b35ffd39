"""`vault index slurm plan|status|resume|merge`: the Slurm modes of `vault index` as sub-verbs. The old flag
spellings (`--slurm N`, `--status`, `--resume`, `--merge`) still work for one release, with a one-line note; a
mirror folder named `slurm` is given as `./slurm`; a mix of modes cannot be spelled (exit 2). Slurm here is the
fake sbatch/scontrol of test_index_slurm_json."""

from __future__ import annotations

import json

import pytest

from tests.cli.json_shapes import check
from tests.cli.test_index_slurm import _mirror, _run_tasks
from tests.cli.test_index_slurm_json import FAKE


@pytest.fixture
def fake_slurm(fake_commands):
    fake_commands(FAKE)


def test_index_sub_verbs_run_every_slurm_mode_without_a_note(tmp_path, vault, fake_slurm):
    mirror = _mirror(tmp_path)
    db = str(tmp_path / "c.db")
    dry = vault("--catalog", db, "index", "slurm", "plan", "--tasks", "2", "--dry-run", "--json", str(mirror))
    assert dry.code == 0, dry.err
    check(json.loads(dry.out), "index.md", "--slurm N --dry-run")
    submitted = vault("--catalog", db, "index", "slurm", "plan", "--tasks", "2", "--partition", "debug", str(mirror))
    assert submitted.code == 0, submitted.err
    assert submitted.out.startswith("submitted plan ") and "vault index slurm status" in submitted.out
    status = vault("--catalog", db, "index", "slurm", "status", "--json")
    assert status.code == 0, status.err
    assert len(json.loads(status.out)["tasks"]) == 2
    _run_tasks(tmp_path / "c.db", json.loads((tmp_path / "c.db.slurm/plan.json").read_text()))
    merged = vault("--catalog", db, "index", "slurm", "merge", "--json")
    assert merged.code == 5, merged.err  # the mirror's flagged members
    assert json.loads(merged.out)["already"] is False
    resumed = vault("--catalog", db, "index", "slurm", "resume", "--json")
    assert resumed.code == 0 and json.loads(resumed.out)["merged"] is True
    for run in (dry, submitted, status, merged, resumed):
        assert "note:" not in run.err


def test_index_sub_verbs_old_spellings_still_work_with_a_one_line_note(tmp_path, vault, fake_slurm):
    mirror = _mirror(tmp_path)
    db = str(tmp_path / "c.db")
    old = vault("--catalog", db, "index", "--slurm", "2", "--json", str(mirror))
    assert old.code == 0, old.err
    assert json.loads(old.out)["tasks"] == [0, 1]
    assert old.err == "vault: note: `vault index --slurm N` is now `vault index slurm plan --tasks N`; the old " \
        "spelling goes in the next release\n"  # fmt: skip
    new = vault("--catalog", db, "index", "slurm", "status", "--json")
    status = vault("--catalog", db, "index", "--status", "--json")
    assert status.code == 0 and json.loads(status.out) == json.loads(new.out)
    assert status.err.count("\n") == 1 and "`vault index slurm status`" in status.err
    _run_tasks(tmp_path / "c.db", json.loads((tmp_path / "c.db.slurm/plan.json").read_text()))
    merged = vault("--catalog", db, "index", "--merge", "-q")
    assert merged.code == 5 and merged.out == ""
    assert "`vault index slurm merge`" in merged.err and merged.err.count("\n") == 1
    resumed = vault("--catalog", db, "index", "--resume")
    assert resumed.code == 0 and resumed.out.startswith("plan ") and "already merged" in resumed.out
    assert "`vault index slurm resume`" in resumed.err


def test_index_sub_verbs_a_mirror_named_slurm_is_given_as_dot_slash(tmp_path, vault, monkeypatch):
    (tmp_path / "slurm" / "001_run").mkdir(parents=True)
    (tmp_path / "slurm" / "001_run" / "notes.txt").write_text("hello\n")
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "c.db")
    done = vault("--catalog", db, "index", "./slurm")
    assert done.code == 0, done.err
    mirrors = json.loads(vault("--catalog", db, "mirrors", "--json").out)
    assert [(m["name"], m["files"]) for m in mirrors] == [("slurm", 1)]
    for words in (["slurm"], ["-q", "slurm"], ["./other", "slurm"]):  # a bare `slurm` is never a mirror
        refused = vault("--catalog", str(tmp_path / "d.db"), "index", *words)
        assert refused.code == 2, (words, refused.err)
        assert refused.err.startswith("vault: error: ") and refused.err.count("\n") == 1, refused.err
    assert "./slurm" in vault("--catalog", db, "index", "-q", "slurm").err
    assert not (tmp_path / "d.db").exists()


@pytest.mark.parametrize("words", [
    ["slurm", "status", "--merge"],
    ["slurm", "merge", "--dry-run"],
    ["slurm", "status", "--resume"],
    ["slurm", "plan", "--tasks", "2", "--status"],
    ["slurm", "plan"],  # --tasks is required
    ["slurm", "plan", "--tasks", "0"],
    ["slurm", "status", "./mirror"],
    ["slurm", "resume", "--dry-run"],
    ["slurm"],
    ["slurm", "nosuch"],
])  # fmt: skip
def test_index_sub_verbs_bad_combinations_are_usage_errors(tmp_path, vault, words):
    r = vault("--catalog", str(tmp_path / "c.db"), "index", *words)
    assert r.code == 2, (words, r.out, r.err)
    assert r.err.startswith("vault: error: ") and r.err.count("\n") == 1, r.err
    assert "vault index slurm" in r.err  # the help of the sub-verb the mistake was made in


def test_index_sub_verbs_are_in_the_help(vault):
    r = vault("index", "--help")
    assert r.code == 0 and "vault index slurm plan" in r.out and "./slurm" in r.out
    r = vault("index", "slurm", "--help")
    assert r.code == 0 and all(verb in r.out for verb in ("plan", "status", "resume", "merge"))
    r = vault("index", "slurm", "plan", "--help")
    assert r.code == 0 and "--tasks N" in r.out and "--dry-run" in r.out
