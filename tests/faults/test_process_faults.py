"""Processes and state: SIGTERM or SIGHUP to `vault repro` (a closed terminal, `timeout`, a batch system) stops its
children and records the run interrupted, as Ctrl-C does; two mirrors with the same folder name are two mirrors."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from cli.test_repro import processes_naming


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_to_repro_stops_the_children_and_records_the_run_interrupted(demo_catalog, tmp_path, sig, code,
                                                                             tally):  # fmt: skip
    out = tmp_path / "runs"
    env = {**os.environ, "VAULT_STANDIN_DELAY": "30", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "cloudvault", "--catalog", str(demo_catalog), "repro", "014_ss20_temp0",
            "--standin", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(out.glob("*/logs/gpu7.out")):
        time.sleep(0.1)
    time.sleep(1.0)
    tally("kill")
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    (folder,) = out.iterdir()
    left = processes_naming(str(folder))
    for pid in left:  # never leave them running, whatever the outcome
        os.kill(pid, signal.SIGKILL)
    tally("write_outside", len(left))  # children still writing after vault has gone
    assert left == []
    assert proc.returncode == code, err
    prov = json.loads((folder / "provenance.json").read_text())
    assert prov["status"] == "interrupted"
    from cloudvault.catalog.db import open_catalog
    from cloudvault.catalog.records import runs

    (recorded,) = runs(open_catalog(demo_catalog, readonly=True), run_id=folder.name)
    assert recorded.status == "interrupted"


def test_two_mirrors_with_the_same_folder_name_are_two_mirrors(demo_mirror, tmp_path, vault, tally):
    """/a/Marvell_cloud (the original) and /b/Marvell_cloud (a copy, half of it): the second is not taken for the
    first emptied, neither replaces the other, each keeps its own name."""
    a, b = tmp_path / "a/Marvell_cloud", tmp_path / "b/Marvell_cloud"
    shutil.copytree(demo_mirror, a)
    b.mkdir(parents=True)
    shutil.copytree(demo_mirror / "014_ss20_temp0_chunk1024", b / "014_ss20_temp0_chunk1024")
    db = str(tmp_path / "c.db")
    for root in (a, b):
        tally("hostile_input")
        r = vault("--catalog", db, "index", "--mirror", "marvell_cloud", "--quiet", str(root))
        assert r.code == 0, r.err
    import sqlite3

    conn = sqlite3.connect(db)
    mirrors = conn.execute("SELECT name, root FROM mirrors ORDER BY id").fetchall()
    files = dict(conn.execute("SELECT m.root, count(*) FROM files f JOIN mirrors m ON m.id = f.mirror_id GROUP BY 1"))
    tally("rows_lost", max(0, 2 - len(mirrors)))
    assert [root for _, root in mirrors] == [str(a), str(b)] and len({n for n, _ in mirrors}) == 2, mirrors
    assert files[str(a)] > files[str(b)] > 0
    again = vault("--catalog", db, "index", "--quiet")  # every known mirror again, each by its own root
    assert again.code == 0, again.err
    assert conn.execute("SELECT name, root FROM mirrors ORDER BY id").fetchall() == mirrors
    shown = vault("--catalog", db, "show", "014")  # in both: named by each one's own display name
    assert shown.code == 4 and all(f"{name}:014" in shown.err for name, _ in mirrors), shown.err
