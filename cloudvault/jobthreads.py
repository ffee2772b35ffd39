"""Threads that run jobs in the order they were started: the pool under the index's member hashing
(hashing.HashThreads) and env restore's file writers (restore/env/bulk.py).

A job is any object with a `run()` that feeds on a stream the starting thread is still producing. Jobs are taken
in start order, so the job being fed is never waited for by one started after it, and a pool of N threads holds at
most N jobs in hand.
"""

from __future__ import annotations


class JobThreads:
    """N daemon threads taking jobs in start order. `close()` lets the started jobs finish, then ends the threads
    (joining them when `join` is true)."""

    def __init__(self, threads: int, name: str) -> None:
        import queue  # here, not at import: hashing (and so most commands) import this module
        import threading

        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._run, name=name, daemon=True) for _ in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job.run()
            self.ran(job)

    def ran(self, job) -> None:
        """Called in the job's thread once its run() returned; a pool that watches its jobs overrides it."""

    def submit(self, job):
        self._jobs.put(job)
        return job

    def close(self, *, join: bool = False) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        if join:
            for thread in self._threads:
                thread.join()
