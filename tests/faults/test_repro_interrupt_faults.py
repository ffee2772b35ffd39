"""Ctrl-C at any point of `vault repro --repeat N`: whatever it interrupts, no run is left `running` in the catalog
(or in its provenance.json), and the run it interrupted is recorded `interrupted`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cloudvault.catalog.records
import cloudvault.repro.run

# Each line of these (a run's steps and its recording) is a point a Ctrl-C is injected at. Left out: what they call
# that loops over files or requests (staging, merging, comparing), where an interrupt is the same as one at the
# line that called it, and jobthreads.held_signals, which holds real signals (an exception made up inside it stands
# for none).
STEPS = ("reproduce", "_collect_and_compare", "_write_report", "_close", "_record_end", "_recorded_ended",
         "_write_json")  # fmt: skip
RECORDS = (cloudvault.catalog.records.start_run, cloudvault.catalog.records.finish_run)
WATCHED = {f.__code__ for f in (*(getattr(cloudvault.repro.run, name, None) for name in STEPS), *RECORDS) if f}
LEFT_OPEN = ("running", "queued")


class CtrlCAt:
    """A trace function that raises KeyboardInterrupt (as Ctrl-C does) at the at-th line run in the watched code."""

    def __init__(self, at: int) -> None:
        self.at, self.seen, self.fired = at, 0, None

    def __call__(self, frame, event, arg):
        if event == "call" and frame.f_code in WATCHED:
            return self.line
        return None

    def line(self, frame, event, arg):
        if event == "line":
            self.seen += 1
            if self.seen == self.at:
                self.fired = f"{frame.f_code.co_name}:{frame.f_lineno}"
                raise KeyboardInterrupt
        return self.line


def _runs(catalog: Path) -> dict[str, str]:
    from cloudvault.catalog.db import open_catalog
    from cloudvault.catalog.records import runs

    conn = open_catalog(catalog, readonly=True)
    try:
        return {r.run_id: r.status for r in runs(conn)}
    finally:
        conn.close()


def _folders(out: Path) -> dict[str, str]:
    """Each run folder's status in its provenance.json ('' where it has none yet)."""
    found = {}
    for folder in out.iterdir() if out.exists() else []:
        prov = folder / "provenance.json"
        found[folder.name] = json.loads(prov.read_text())["status"] if prov.exists() else ""
    return found


def test_ctrl_c_at_every_point_of_a_run_leaves_no_run_running(demo_catalog, tmp_path, vault, tally):
    """Class: an interrupt between two steps of a run's end (its report written, its record not yet) must not leave
    the run `running` for good. 016's recipe, a Ctrl-C injected at each line of the run's steps in turn (every run
    of a --repeat batch goes through the same steps; the next test repeats with real signals)."""
    out = tmp_path / "runs"
    argv = ("--catalog", str(demo_catalog), "repro", "016_plots", "--out", str(out))
    at, tried = 0, []
    while True:
        at += 1
        before_runs, before_folders = _runs(demo_catalog), _folders(out)
        ctrl_c = CtrlCAt(at)
        sys.settrace(ctrl_c)
        try:
            result = vault(*argv)
        finally:
            sys.settrace(None)
        if ctrl_c.fired is None:  # the batch ran to its end: every point has been tried
            assert result.code == 0, result.err
            break
        tally("kill")
        tried.append(ctrl_c.fired)
        assert result.code == 130, f"Ctrl-C at {ctrl_c.fired}: exit {result.code}: {result.err}"
        new_runs = {k: v for k, v in _runs(demo_catalog).items() if k not in before_runs}
        new_folders = {k: v for k, v in _folders(out).items() if k not in before_folders}
        left = {k: v for k, v in {**new_folders, **new_runs}.items() if v in LEFT_OPEN}
        tally("rows_lost", len(left))
        assert not left, f"Ctrl-C at {ctrl_c.fired} left {left} running"
        assert new_runs == {k: v for k, v in new_folders.items() if k in new_runs}, ctrl_c.fired  # folder = row
        assert list(new_runs.values()).count("interrupted") <= 1, new_runs
        last = max(new_runs, default=None)
        if last is not None and new_runs[last] != "finished":
            assert new_runs[last] == "interrupted", f"Ctrl-C at {ctrl_c.fired}: {new_runs}"
    print(f"{len(tried)} points interrupted")
    assert len(tried) > 30 and any(t.startswith("_record_end") for t in tried), tried


def test_ctrl_c_pressed_twice_at_random_points_of_a_repeated_run_leaves_no_run_running(demo_catalog, tmp_path, tally):
    """Real signals to a real `vault repro 014 --standin --repeat 3`: one Ctrl-C, or two 30 ms apart (an impatient
    user), at 16 delays spread over the batch's first 80% (timed here first); every run it started ends
    finished or interrupted, and vault exits 130 with one line."""
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}

    def argv(out: Path) -> list[str]:
        return [sys.executable, "-m", "cloudvault", "--catalog", str(demo_catalog), "repro", "014_ss20_temp0",
                "--standin", "--repeat", "3", "--out", str(out)]  # fmt: skip

    timed = []
    for n in range(2):  # the faster of two (the first pays for cold caches)
        start = time.monotonic()
        subprocess.run(argv(tmp_path / f"timed{n}"), env=env, capture_output=True, check=True, timeout=120)
        timed.append(time.monotonic() - start)
    batch_s = min(timed)
    for n, share in enumerate([0.05 * k for k in range(1, 17)]):
        out = tmp_path / f"runs{n}"
        proc = subprocess.Popen(argv(out), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(share * batch_s)
        tally("kill")
        proc.send_signal(signal.SIGINT)
        if n % 2:
            time.sleep(0.03)
            proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        folders = _folders(out)
        statuses = {k: v for k, v in _runs(demo_catalog).items() if k in folders}
        left = {k: v for k, v in {**folders, **statuses}.items() if v in LEFT_OPEN}
        tally("rows_lost", len(left))
        assert not left, f"Ctrl-C after {share * batch_s:.2f} s left {left} running"
        assert set(statuses.values()) <= {"finished", "interrupted"}, statuses
        tally("traceback", err.count("Traceback"))
        assert "Traceback" not in err, err
        if proc.returncode == 0:  # the Ctrl-C came once the batch had ended (it ran faster than when timed)
            assert sorted(statuses.values()) == ["finished"] * 3, statuses
        else:  # -2: the second Ctrl-C came after vault had reported the first and put Python's own handler back
            assert proc.returncode in (130, -signal.SIGINT), err
