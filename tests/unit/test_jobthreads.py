"""The one pool of threads taking jobs in start order (cloudvault/jobthreads.py), and its two users: member hashing
(hashing.HashThreads) and env restore's file writers (restore/env/bulk.py _Writers)."""

from __future__ import annotations

import threading

import blake3

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
