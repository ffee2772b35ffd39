"""Injection and lost flags: a recipe's [slurm] fields and --partition cannot add a line to a job script, run
folders with a space or an apostrophe run as they are, a shard that lost rows of any table is refused at merge,
and the job scripts do not depend on the folder they were submitted from."""

from __future__ import annotations

import json
import sqlite3
import sys
import time

import pytest
from cli.test_index_slurm import _run_tasks, _write_plan
from integration.test_index_slurm import _slurm

from cloudvault.index.slurm import Layout
from faults.hostile import hostile_recipe

INJECTED = "\ntouch {pwned}\n#SBATCH --wrap=x"


def _with_slurm(text: str, field: str, value: str) -> str:
    return text + f"\n[slurm]\n{field} = {json.dumps(value)}\n"


@pytest.mark.parametrize(
    ("field", "value"),
    [("time", "01:00:00" + INJECTED), ("partition", "debug" + INJECTED), ("mem", "1G" + INJECTED),
     ("gres", "gpu:1" + INJECTED), ("time", "1:00 --wrap=x"), ("partition", "debug --chdir=/"), ("mem", "lots"),
     ("gres", "gpu:1;touch x"), ("cpus_per_task", "4\nx")],
)  # fmt: skip
def test_a_slurm_field_outside_slurms_grammar_is_refused_before_any_script(demo_catalog, vault, tmp_path, monkeypatch,
                                                                         field, value, tally):  # fmt: skip
    pwned = tmp_path / "PWNED"
    name = hostile_recipe(tmp_path, monkeypatch, "inject", "014_ss20_temp0",
                          lambda t: _with_slurm(t, field, value.format(pwned=pwned)))  # fmt: skip
    tally("hostile_input")
    r = vault("--catalog", str(demo_catalog), "repro", name, "--standin", "--executor", "slurm", "--dry-run",
              "--out", str(tmp_path / "runs"))  # fmt: skip
    tally("write_outside", int("touch" in r.out))  # the command became a line of the script
    assert r.code == 2 and f"slurm.{field}" in r.err and "touch" not in r.out, (r.code, r.out, r.err)
    assert not pwned.exists()


def test_a_partition_option_with_a_newline_is_refused(demo_catalog, vault, tmp_path, tally):
    tally("bad_argument")
    r = vault("--catalog", str(demo_catalog), "repro", "014_ss20_temp0", "--standin", "--executor", "slurm",
              "--dry-run", "--partition", "debug\ntouch /tmp/x", "--out", str(tmp_path / "runs"))  # fmt: skip
    assert r.code == 2 and "--partition" in r.err and "touch" not in r.out, (r.out, r.err)


def test_valid_slurm_fields_are_written_as_slurm_reads_them(demo_catalog, vault, tmp_path, monkeypatch):
    name = hostile_recipe(tmp_path, monkeypatch, "fine", "014_ss20_temp0", lambda t: t + (
        '\n[slurm]\ntime = "2-00:30:00"\npartition = "debug,h200"\nmem = "16G"\ngres = "gpu:h200:1"\n'))  # fmt: skip
    r = vault("--catalog", str(demo_catalog), "repro", name, "--executor", "slurm", "--dry-run", "--force-preflight",
              "--out", str(tmp_path / "runs"))  # fmt: skip
    assert "#SBATCH --time=2-00:30:00" in r.out and "#SBATCH --partition=debug,h200" in r.out, (r.out, r.err)
    assert "#SBATCH --mem=16G" in r.out and "#SBATCH --gres=gpu:h200:1" in r.out


def test_a_run_folder_with_a_space_and_an_apostrophe_runs_locally(demo_catalog, vault, tmp_path, tally):
    out = tmp_path / "it's a run" / "runs"
    tally("hostile_input")
    r = vault("--catalog", str(demo_catalog), "repro", "014_ss20_temp0", "--standin", "--out", str(out))
    tally("traceback", int("Traceback" in r.err))
    assert r.code == 0 and "REPRODUCED" in r.out, r.err


@pytest.mark.slurm
def test_a_run_folder_with_a_space_and_an_apostrophe_runs_under_slurm(demo_catalog, vault, tmp_path, tally):
    _slurm()
    out = tmp_path / "it's a run" / "runs"
    tally("hostile_input")
    r = vault("--catalog", str(demo_catalog), "repro", "014_ss20_temp0", "--standin", "--executor", "slurm",
              "--out", str(out))  # fmt: skip
    assert r.code == 0 and "REPRODUCED" in r.out, r.err


def test_a_shard_whose_flag_rows_are_gone_is_refused_at_merge(demo_mirror, tmp_path, vault, tally):
    db = tmp_path / "c.db"
    _run_tasks(db, _write_plan(db, demo_mirror, 2))
    lost = 0
    for task in range(2):
        conn = sqlite3.connect(Layout(db).shard(task))
        lost += conn.execute("DELETE FROM flags").rowcount
        conn.commit()
        conn.close()
    assert lost > 0  # the demo mirror's archives carry flags (unsafe members, secrets)
    tally("corruption")
    r = vault("--catalog", str(db), "index", "slurm", "merge")
    merged = sqlite3.connect(db).execute("SELECT count(*) FROM archives").fetchone()[0] if db.exists() else 0
    tally("rows_lost", lost if merged else 0)
    assert r.code == 5 and "flags" in r.err, r.err
    assert merged == 0


@pytest.mark.slurm
def test_the_index_job_scripts_run_from_a_folder_that_shadows_the_package(demo_mirror, tmp_path, vault, monkeypatch,
                                                                         tally):  # fmt: skip
    """Submitted from inside a clone of this repository (a `cloudvault/` there without the installed modules),
    the tasks and the merge still run the installed vault and the catalog appears."""
    _slurm()
    clone = tmp_path / "clone"
    (clone / "cloudvault").mkdir(parents=True)
    (clone / "cloudvault/__init__.py").write_text("raise ImportError('the clone, not the installed package')\n")
    monkeypatch.chdir(clone)
    db = tmp_path / "c.db"
    tally("hostile_input")
    r = vault("--catalog", str(db), "index", "slurm", "plan", "--tasks", "2", "--json", str(demo_mirror))
    assert r.code == 0, r.err
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = json.loads(vault("--catalog", str(db), "index", "slurm", "status", "--json").out)
        if status["merge_state"].startswith(("merged", "COMPLETED", "FAILED", "CANCEL", "TIMEOUT")):
            break
        time.sleep(1)
    logs = " | ".join(p.read_text()[-300:] for p in Layout(db).folder.glob("logs/*.out"))
    assert status["merge_state"].startswith("merged"), (status, logs)
    assert sqlite3.connect(db).execute("SELECT count(*) FROM archives").fetchone()[0] > 0


def test_the_job_scripts_name_no_relative_module_path(tmp_path):
    """python -P (no cwd on sys.path) and a --chdir of vault's own folder in every script vault writes."""
    from cloudvault.index.slurm import render_array, render_merge

    lay = Layout(tmp_path / "c.db")
    plan = {"hash": "0" * 64, "tasks": [{}]}
    for script in (render_array(lay, plan, None), render_merge(lay, plan, None)):
        assert f"{sys.executable} -P -m cloudvault" in script and f'#SBATCH --chdir="{lay.folder}"' in script
