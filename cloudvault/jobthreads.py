"""Threads that run jobs in the order they were started: the pool under the index's member hashing
(hashing.HashThreads) and env restore's file writers (restore/env/bulk.py); and how a signal stops such threads.

A job is any object with a `run()` that feeds on a stream the starting thread is still producing. Jobs are taken
in start order, so the job being fed is never waited for by one started after it, and a pool of N threads holds at
most N jobs in hand. A pool that is stopped (`stop()`: a signal, an error) gives every thread its end at once,
without blocking, and its join is bounded: the threads are daemons, so one stuck in a system call cannot keep the
process from ending.

StopOnSignal makes a Ctrl-C (or SIGTERM, SIGHUP) stop a block's threads before its handler raises: whatever line
the signal lands on, even one in the middle of starting or stopping them, every thread has been told to end.
held_signals() keeps a signal out of a block that must not be cut in two, until it ends.
"""

from __future__ import annotations

STOP_JOIN_SECONDS = 5.0  # how long a stopped pool's threads are waited for; they are daemons past that


class JobThreads:
    """N daemon threads taking jobs in start order. `close()` lets the started jobs finish, then ends the threads
    (joining them when `join` is true); `stop()` ends them sooner (a subclass ends its started jobs too)."""

    def __init__(self, threads: int, name: str) -> None:
        import queue  # here, not at import: hashing (and so most commands) import this module
        import threading

        self._jobs: queue.SimpleQueue = queue.SimpleQueue()  # never full: putting never blocks
        self.stopping = threading.Event()
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

    def stop(self) -> None:
        """Every thread told to end after the job in its hands, at once and without blocking (a signal handler
        calls it); a subclass whose jobs wait on their producer ends them too. Safe to call again."""
        self.stopping.set()
        for _ in self._threads:
            self._jobs.put(None)

    def close(self, *, join: bool = False) -> None:
        """The started jobs run, then the threads end; with join, waited for (a stopped pool: at most
        STOP_JOIN_SECONDS in all)."""
        import time

        for _ in self._threads:
            self._jobs.put(None)
        if not join:
            return
        deadline = time.monotonic() + STOP_JOIN_SECONDS
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()) if self.stopping.is_set() else None)


class StopOnSignal:
    """`with StopOnSignal(stop) as signals:` while the block starts threads, a stopping signal (SIGINT, SIGTERM,
    SIGHUP, where a Python handler takes it) is held; from `signals.arm()` (call it once the threads can be
    stopped), and for a signal held till then, stop() runs first, then the signal's own handler (which raises,
    as Ctrl-C does). stop() must only tell threads to end (events, SimpleQueue puts): it runs inside the
    handler, which may have cut into a queue's lock in this thread, so a join or a Queue call there can deadlock.
    Outside the main thread (no signal lands there) it does nothing."""

    def __init__(self, stop) -> None:
        self._stop = stop
        self._armed = False
        self._held: tuple | None = None
        self._previous: dict = {}

    def __enter__(self) -> StopOnSignal:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous = signal.getsignal(sig)
            if callable(previous):
                self._previous[sig] = previous
                signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum, frame) -> None:
        if not self._armed:
            self._held = self._held or (signum, frame)
            return
        self._stop()
        self._previous[signum](signum, frame)

    def arm(self) -> None:
        """From now on a signal stops the threads and raises; one held until now does so at once."""
        self._armed = True
        if self._held is not None:
            self._on_signal(*self._held)

    def __exit__(self, *exc) -> None:
        import signal

        for sig, previous in self._previous.items():
            if signal.getsignal(sig) == self._on_signal:  # a handler that replaced ours (SIG_IGN) stays
                signal.signal(sig, previous)
        if self._held is not None and not self._armed:  # the block ended before it armed: the signal still counts
            self._armed = True
            self._on_signal(*self._held)


def held_signals() -> StopOnSignal:
    """`with held_signals():` a block no stopping signal cuts in two (two renames that must both happen): one
    that lands in it is handled, and raises, once the block has ended."""
    return StopOnSignal(_nothing)


def _nothing() -> None:
    return None
