"""Worker processes started safely whatever else the starting process runs."""

from __future__ import annotations


def worker_context(preload: list[str]):
    """The multiprocessing context to start workers with. Forked (they start at once, with this process's imports)
    when this process runs no other thread. Else from a fresh process (forkserver, preloading these modules): a
    child forked while another thread holds a lock that only that thread would let go (one of SQLite's own, while
    it opens a file; the stderr lock of a progress bar) waits on it for ever."""
    import multiprocessing
    import threading

    if threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preload)
    return ctx
