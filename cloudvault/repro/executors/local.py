"""The local executor: one child process per GPU slot, each in its own process group, pinned to its CPU cores when
this machine has them; Ctrl-C stops them all (SIGTERM, then SIGKILL after a grace period)."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from cloudvault.repro.executors.base import Executor, Job
from cloudvault.repro.plan import Plan, pinnable

GRACE_S = 5.0


class LocalExecutor(Executor):
    name = "local"

    def describe(self, plan: Plan) -> list[str]:
        lines = []
        for p in plan.processes:
            pin = f" on cores {p.cpu_cores[0]}-{p.cpu_cores[-1]}" if pinnable(p.cpu_cores) else ""
            lines.append(f"{p.name}: cd {p.cwd} && {shlex.join(p.argv)}{pin}")
        return lines

    def submit(self, plan: Plan) -> Job:
        logs = plan.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        (plan.run_dir / "work").mkdir(exist_ok=True)
        handles = []
        try:
            for p in plan.processes:
                Path(p.cwd).mkdir(parents=True, exist_ok=True)
                with open(logs / f"{p.name}.out", "wb") as out, open(logs / f"{p.name}.err", "wb") as err:
                    child = subprocess.Popen(p.argv, cwd=p.cwd, env={**os.environ, **p.env}, stdout=out, stderr=err,
                                             stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
                handles.append(child)
                _pin(child.pid, p.cpu_cores)
        except BaseException:
            self.cancel(Job(plan, handles))
            raise
        return Job(plan, handles)

    def poll(self, job: Job) -> list[int] | None:
        for i, handle in enumerate(job.handles):
            if job.codes[i] is None:
                job.codes[i] = handle.poll()
        return None if None in job.codes else [int(c) for c in job.codes]

    def collect(self, job: Job) -> Path:
        return job.plan.run_dir / "work"  # local children wrote there already

    def cancel(self, job: Job) -> None:
        live = [h for h in job.handles if h.poll() is None]
        for h in live:
            _signal_group(h.pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        for h in live:
            try:
                h.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(h.pid, signal.SIGKILL)
                h.wait()
        job.codes = [h.poll() for h in job.handles]


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _pin(pid: int, cores: list[int]) -> None:
    """The recipe's cores (24g..24g+23 on the lab's nodes) when this machine has all of them; else unpinned."""
    if pinnable(cores) and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(pid, cores)
