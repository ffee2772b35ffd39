"""A reader that leaves (`vault ... | head`) drops vault's output, never its work: the work finishes and the exit
code is the work's; data piped out (extract to stdout) stops, and a stop is not exit 0."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys


def _piped(command: str, catalog, cwd) -> subprocess.CompletedProcess:
    """command (after `vault`) piped into `head`, with pipefail: the exit code is vault's."""
    env = {**os.environ, "VAULT_CATALOG": str(catalog)}
    shell = f"{sys.executable} -m cloudvault {command}"
    return subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True, text=True, env=env, cwd=cwd)


def test_restoring_every_env_into_head_restores_them_all_and_says_so_in_its_exit_code(demo_catalog, vault, tmp_path):
    listed = vault("--catalog", str(demo_catalog), "restore", "env", "nebius", "--list", "--json")
    names = [env["name"] for env in json.loads(listed.out)["envs"]]
    r = _piped("restore env nebius --to X | head -3", demo_catalog, tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    restored = sqlite3.connect(demo_catalog).execute("SELECT count(*) FROM restores").fetchone()[0]
    assert restored == len(names) > 1
    for name in names:
        target = tmp_path / "X" if name == "base" else tmp_path / "X/envs" / name
        assert (target / "conda-meta/vault-restore.json").is_file(), name


def test_a_run_whose_output_nobody_reads_still_runs_to_its_verdict(demo_catalog, vault, tmp_path):
    r = _piped("repro 016_plots --out runs 2>&1 | head -1", demo_catalog, tmp_path)
    runs = json.loads(vault("--catalog", str(demo_catalog), "runs", "--json").out)
    mine = [run for run in runs if run["recipe"] == "016_plots"]
    assert [run["status"] for run in mine] == ["finished"], (mine, r.stderr)
    assert r.returncode == 0

