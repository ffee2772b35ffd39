"""Interrupt a command at every line it runs in chosen modules, one child process per line, and report how each
child ended: its exit code, how long it took, and whether it had to be killed.

Run as `python interrupt_points.py REPORT TIMEOUT MODULES -- VAULT ARGS...`. A first child runs the command with a
tracer that notes, in order, every distinct line of MODULES (file name suffixes, comma-separated) that the main
thread runs; then one child per noted line runs it again and is sent SIGINT (by itself, so the signal lands
there and its handler runs at the next point the interpreter takes signals) the first time that line is about to
run: where a Ctrl-C could land. Children are forked from
this process once cloudvault is imported (each starts in milliseconds, with no thread of its own yet) and end as
a process ends, through the interpreter's exit (which joins what it must join). A child still running after
TIMEOUT seconds is killed, and reported as hung. After each child, what it left beside its --prefix is reported
(`left`: the names in the prefix's folder) and removed, so the next child starts clean. REPORT gets one JSON line
per child.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def _tracer(modules: tuple[str, ...], on_line):
    def local(frame, event, arg):
        if event == "line":
            on_line(frame.f_code.co_filename, frame.f_lineno)
        return local

    def trace(frame, event, arg):
        return local if frame.f_code.co_filename.endswith(modules) else None

    return trace


def _child(argv: list[str], modules: tuple[str, ...], point: tuple[str, int] | None, notes: str | None) -> None:
    """In the forked child: run vault with the tracer, then end as a process ends (SystemExit to the top)."""
    from cloudvault.cli.main import main

    seen: dict[tuple[str, int], None] = {}

    def on_line(filename: str, lineno: int) -> None:
        key = (filename, lineno)
        if point is None:
            seen.setdefault(key, None)
        elif key == point:
            sys.settrace(None)
            signal.raise_signal(signal.SIGINT)

    sys.settrace(_tracer(modules, on_line))
    try:
        code = main(argv)
    finally:
        sys.settrace(None)
        if notes:
            with open(notes, "w") as fh:
                json.dump([list(k) for k in seen], fh)
    sys.stdout.flush()
    sys.exit(code)


def _run(argv, modules, point, notes, timeout: float) -> dict:
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        _child(argv, modules, point, notes)  # ends in SystemExit, up through this stack to the interpreter's exit
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"point": point, "code": os.waitstatus_to_exitcode(status), "seconds": time.monotonic() - start,
                    "hung": False}  # fmt: skip
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return {"point": point, "code": None, "seconds": timeout, "hung": True}


def _left_and_cleared(folder: str) -> list[str]:
    """The names in folder (what a child left beside its target), then removed."""
    import shutil

    left = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    for name in left:
        path = os.path.join(folder, name)
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
    return left


def main() -> int:
    report, timeout, modules = sys.argv[1], float(sys.argv[2]), tuple(sys.argv[3].split(","))
    argv = sys.argv[sys.argv.index("--") + 1 :]
    folder = os.path.dirname(argv[argv.index("--prefix") + 1])
    import cloudvault.cli.main  # noqa: F401  imported once, before the forks
    import cloudvault.restore.env.restore  # noqa: F401

    notes = report + ".points"
    first = _run(argv, modules, None, notes, timeout * 4)
    with open(report, "w") as out:
        out.write(json.dumps(first | {"first": True, "left": _left_and_cleared(folder)}) + "\n")
        out.flush()
        with open(notes) as fh:
            points = [tuple(p) for p in json.load(fh)]
        for point in points:
            ended = _run(argv, modules, point, None, timeout)
            out.write(json.dumps(ended | {"left": _left_and_cleared(folder)}) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
