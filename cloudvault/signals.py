"""Stopping signals (Ctrl-C, SIGTERM, SIGHUP) held through a block that must not be cut in two, then acted on."""

from __future__ import annotations

import contextlib
import signal
import threading

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def stopping_signals_held():
    """SIGINT, SIGTERM and SIGHUP noted, not acted on, inside the block; the first one noted is raised again (to
    the handler that was there) when it ends. Outside the main thread, where no handler can be set, nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous: dict[int, object] = {}
    try:
        for sig in STOPPING_SIGNALS:
            previous[sig] = signal.signal(sig, lambda signum, frame: held.append(signum))
        yield
    finally:
        for sig, handler in reversed(previous.items()):  # SIGINT, the one pressed twice, last
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
        if held:
            signal.raise_signal(held[0])
