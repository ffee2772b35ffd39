"""Ctrl-C (SIGINT to the whole foreground process group, as a terminal sends it) while `vault index` reads archives
in several worker processes: exit 130, one line on stderr, a catalog that is whole."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_during_an_index_with_workers_is_one_line_and_a_whole_catalog(demo_mirror, tmp_path, tally, sig, code):
    mirror = tmp_path / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    db = tmp_path / "c.db"
    argv = [sys.executable, "-m", "cloudvault", "--catalog", str(db), "index", "--workers", "3", "-q", str(mirror)]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not any(p.startswith(".c.db.shards-") for p in os.listdir(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.002)  # the workers are started: the shards folder is made first
    time.sleep(0.05)
    tally("kill")
    os.killpg(proc.pid, sig)  # the terminal's Ctrl-C reaches every process of the group, workers too
    _, err = proc.communicate(timeout=60)
    tally("traceback", err.count("Traceback"))
    assert proc.returncode == code, err
    assert err.count("\n") == 1 and err.startswith("vault: error: ") and "Traceback" not in err, err
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert not [p for p in os.listdir(tmp_path) if ".shards-" in p]
