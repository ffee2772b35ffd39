"""Interrupt a command at every line it runs in chosen modules, one child process per line, and report how each
child ended: its exit code, how long it took, and whether it had to be killed.

Run as `python interrupt_points.py REPORT TIMEOUT MODULES [--twice] -- VAULT ARGS...`. A first child runs the
command with a tracer that notes, in order, every distinct line of MODULES (file name suffixes, comma-separated)
that the main thread runs; then one child per noted line runs it again and sends itself SIGINT the first time
that line is about to run, where a Ctrl-C could land (its handler runs there and raises at that line). With
--twice, a child interrupted halfway is then interrupted again at each line its stopping runs (an impatient
Ctrl-C, a batch system's repeated SIGTERM).

Children are forked from this process once cloudvault is imported (each starts in milliseconds, with no thread of
its own yet) and end as a process ends, through the interpreter's exit (which joins what it must join). A child
still running after TIMEOUT seconds is killed and reported as hung. After each child, what it left beside its
--prefix is reported (`left`: the names in the prefix's folder) and removed, so the next child starts clean.
REPORT gets one JSON line per child.
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


def _child(argv: list[str], modules: tuple[str, ...], signals: list, notes: str | None) -> None:
    """In the forked child: run vault with the tracer sending SIGINT at each of signals' lines in turn (noting, for
    notes, the lines run after the last one sent), then end as a process ends (SystemExit to the top)."""
    from cloudvault.cli.main import main

    seen: dict[tuple[str, int], None] = {}
    left = list(signals)
    rearm = []

    def on_line(filename: str, lineno: int) -> None:
        key = (filename, lineno)
        if left and key == left[0]:
            left.pop(0)
            rearm.append(bool(left) or bool(notes))
            signal.raise_signal(signal.SIGINT)  # its handler runs here, and raises out of the tracer
        elif len(left) == 0 and key not in seen:
            seen[key] = None

    def profile(frame, event, arg) -> None:
        """The tracer back once the handler's error has left it (which switches tracing off): the lines the
        stopping runs are traced too."""
        if rearm and rearm[-1]:
            rearm[-1] = False
            sys.settrace(tracer)

    tracer = _tracer(modules, on_line)
    sys.settrace(tracer)
    sys.setprofile(profile)
    try:
        code = main(argv)
    finally:
        sys.settrace(None)
        sys.setprofile(None)
        if notes:
            with open(notes, "w") as fh:
                json.dump([list(k) for k in seen], fh)
    sys.stdout.flush()
    sys.exit(code)


def _run(argv, modules, signals: list, notes, timeout: float) -> dict:
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        _child(argv, modules, signals, notes)  # ends in SystemExit, up through this stack to the interpreter's exit
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"signals": signals, "code": os.waitstatus_to_exitcode(status),
                    "seconds": time.monotonic() - start, "hung": False}  # fmt: skip
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return {"signals": signals, "code": None, "seconds": timeout, "hung": True}


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

    def noted() -> list:
        with open(notes) as fh:
            return [tuple(p) for p in json.load(fh)]

    with open(report, "w") as out:

        def ended(signals: list, note: bool = False, **extra) -> None:
            result = _run(argv, modules, signals, notes if note else None, timeout * (4 if note else 1))
            out.write(json.dumps(result | extra | {"left": _left_and_cleared(folder)}) + "\n")
            out.flush()

        ended([], note=True, first=True)
        points = noted()
        for point in points:
            ended([point])
        if "--twice" in sys.argv[: sys.argv.index("--")]:  # a second Ctrl-C at each line the stopping runs
            first = points[len(points) // 2]
            ended([first], note=True, stopping=True)
            for point in noted():
                ended([first, point], second=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
