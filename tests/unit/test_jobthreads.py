"""The one pool of threads taking jobs in start order (cloudvault/jobthreads.py), and its two users: member hashing
(hashing.HashThreads) and env restore's file writers (restore/env/bulk.py _Writers)."""

from __future__ import annotations

import os
import signal
import threading
import time

import blake3
import pytest

from cloudvault.hashing import HashThreads
from cloudvault.jobthreads import JobThreads


class Step:
    def __init__(self, log: list, n: int, gate: threading.Event | None = None, fail: bool = False) -> None:
        self.log, self.n, self.gate, self.fail, self.error = log, n, gate, fail, None

    def run(self) -> None:
        if self.gate:
            self.gate.wait(5)
        self.log.append(self.n)
        if self.fail:
            self.error = OSError(28, "No space left on device")


def test_one_thread_runs_jobs_in_the_order_they_were_started_and_close_waits_for_them():
    log, gate = [], threading.Event()
    pool = JobThreads(1, "test")
    for n in range(5):
        pool.submit(Step(log, n, gate if n == 0 else None))
    gate.set()
    pool.close(join=True)
    assert log == [0, 1, 2, 3, 4]


def test_ran_is_called_for_every_job_in_its_thread():
    seen = []

    class Watching(JobThreads):
        def ran(self, job) -> None:
            seen.append((job.n, threading.current_thread().name))

    pool = Watching(2, "watcher")
    for n in range(6):
        pool.submit(Step([], n))
    pool.close(join=True)
    assert sorted(n for n, _ in seen) == list(range(6)) and {name for _, name in seen} == {"watcher"}


def test_env_writers_raise_their_flag_when_a_job_fails():
    from cloudvault.restore.env.bulk import _Writers

    writers = _Writers(2)
    writers.start(Step([], 0))
    writers.start(Step([], 1, fail=True))
    writers.close()
    assert writers.failed.is_set() and [job.n for job in writers.started] == [0, 1]
    clean = _Writers(2)
    clean.start(Step([], 0))
    clean.close()
    assert not clean.failed.is_set()


def test_hash_threads_hash_each_stream_started():
    pool = HashThreads(2)
    jobs = [pool.start() for _ in range(3)]
    for i, job in enumerate(jobs):
        job.add(b"x" * (i + 1) * 1000, lambda: None)
        job.end()
    pool.close()
    assert [job.hexdigest() for job in jobs] == [blake3.blake3(b"x" * (i + 1) * 1000).hexdigest() for i in range(3)]


def test_a_stopped_pool_ends_its_idle_threads_at_once_and_waits_a_bounded_time_for_a_stuck_one(monkeypatch):
    from cloudvault import jobthreads

    monkeypatch.setattr(jobthreads, "STOP_JOIN_SECONDS", 0.3)
    stuck = threading.Event()
    pool = JobThreads(3, "stuck")
    pool.submit(Step([], 0, gate=stuck))  # waits 5 s on a gate nobody opens: a thread busy in a long call
    pool.stop()
    clock = time.monotonic()
    pool.close(join=True)
    assert time.monotonic() - clock < 1.5
    assert sum(t.is_alive() for t in pool._threads) == 1 and all(t.daemon for t in pool._threads)
    stuck.set()


def test_stopped_env_writers_end_every_started_job_even_one_never_fed():
    from cloudvault.models import Member
    from cloudvault.restore.env.bulk import _FileJob, _Writers

    writers = _Writers(2)
    member = Member(1, "015", "x", "x", "file", 3, 0o644, 0, None, None, "a.tar.zst", 1, 512)
    jobs = [writers.start(_FileJob(os.open(os.devnull, os.O_WRONLY), f"f{i}", member, None, None, writers.stopping))
            for i in range(4)]  # fmt: skip
    jobs[0].views.put((b"abc", lambda: None))  # fed, never ended: its producer was interrupted
    writers.stop()
    clock = time.monotonic()
    writers.close()
    assert time.monotonic() - clock < 2 and all(job.done.is_set() for job in jobs)
    assert not any(t.is_alive() for t in writers._threads)


class Stopped(Exception):
    pass


@pytest.fixture
def sigterm_raises():
    """SIGTERM handled by a Python handler raising Stopped, as vault's main() installs one; put back after."""
    def handler(signum, frame):
        raise Stopped()

    previous = signal.signal(signal.SIGTERM, handler)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_a_signal_while_threads_start_is_held_then_stops_them_before_its_handler_raises(sigterm_raises):
    from cloudvault.jobthreads import StopOnSignal

    calls = []
    with pytest.raises(Stopped), StopOnSignal(lambda: calls.append("stop")) as signals:
        signal.raise_signal(signal.SIGTERM)  # lands while the threads start: held
        for _ in range(1000):  # the interpreter runs the handler at its next check
            pass
        calls.append("started")
        signals.arm()
        calls.append("not reached")
    assert calls == ["started", "stop"]
    calls.clear()
    with pytest.raises(Stopped), StopOnSignal(lambda: calls.append("stop")) as signals:
        signals.arm()
        signal.raise_signal(signal.SIGTERM)
        for _ in range(1000):
            pass
    assert calls == ["stop"]


def test_held_signals_keep_a_signal_out_of_the_block_till_it_ends(sigterm_raises):
    from cloudvault.jobthreads import held_signals

    done = []
    with pytest.raises(Stopped), held_signals():
        signal.raise_signal(signal.SIGTERM)
        for _ in range(1000):
            pass
        done.append("both renames")
    assert done == ["both renames"]
    assert signal.getsignal(signal.SIGTERM).__name__ == "handler"  # vault's handler is back
