"""The executor contract (DVC's BaseExecutor is the model): describe -> preflight -> submit -> wait (the shared poll
loop here) -> collect, and cancel. Local processes, docker containers and a Slurm job array implement it, so
`vault repro` never asks which one it holds; a detachable executor (one whose jobs wait in a queue) also resumes a
job by its id and says whether it has started.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from cloudvault.errors import Interrupted, UsageError, VaultError, as_interrupted
from cloudvault.repro.plan import Plan
from cloudvault.repro.preflight import Check

OnExit = Callable[[str, int, float], None]  # (process name, exit code, seconds since the wait began)


class Job:
    """What submit returns: the handles to wait for, collect and cancel (pids, container ids; one per process,
    or None where the queue holds them), the job id a queue gave, each process's exit code once known, and the
    queue's final word on the job (Slurm: 'COMPLETED', 'FAILED,TIMEOUT'), None where there is no queue."""

    def __init__(self, plan: Plan, handles: list, job_id: str | None = None) -> None:
        self.plan, self.handles, self.job_id = plan, handles, job_id
        self.codes: list[int | None] = [None] * len(handles)
        self.seconds: list[float | None] = [None] * len(handles)  # how long each ran, where the executor knows
        self.state: str | None = None


class Executor(ABC):
    """Where a plan's processes run. Subclasses implement describe, submit, poll, collect and cancel; the rest
    has a default that fits an executor whose processes run here and end with vault."""

    name: ClassVar[str]
    queues: ClassVar[bool] = False  # a submitted job may wait in a queue: recorded as queued, can be detached
    runs_here: ClassVar[bool] = True  # the processes run on this machine, so its GPUs are theirs
    job_label: ClassVar[str] = "job"  # what `vault runs` calls a detached run's job: 'Slurm job 45'
    poll_s: ClassVar[float] = 0.05  # between two polls of the wait loop

    @property
    def options(self) -> dict:
        """The executor's own options, as provenance records them to rebuild it for a detached run."""
        return {}

    @abstractmethod
    def describe(self, plan: Plan) -> list[str]:
        """What submit would do, one line each (the dry run prints these)."""

    def preflight(self, plan: Plan) -> list[Check]:
        """The executor's own checks (daemon, image, partition); each replaces the local check of its name."""
        return []

    @abstractmethod
    def submit(self, plan: Plan) -> Job:
        """Start every process of the plan; logs go to run_dir/logs/NAME.out and .err."""

    @abstractmethod
    def poll(self, job: Job) -> list[int] | None:
        """Fill job.codes for the processes that have ended; all the codes once every one has, else None."""

    def wait(self, job: Job, on_exit: OnExit | None = None) -> list[int]:
        """Poll until every process ended; their exit codes (a failed process is a code, not an error).
        on_exit(name, code, seconds) as each one ends. Ctrl-C cancels the job, then raises Interrupted."""
        began, told = time.monotonic(), set()
        try:
            while True:
                codes = self.poll(job)
                for i, code in enumerate(job.codes):
                    if code is not None and i not in told:
                        told.add(i)
                        if on_exit:
                            took = job.seconds[i] if job.seconds[i] is not None else time.monotonic() - began
                            on_exit(job.plan.processes[i].name, code, took)
                if codes is not None:
                    return codes
                time.sleep(self.poll_s)
        except (KeyboardInterrupt, Interrupted) as exc:
            self.cancel(job)
            raise as_interrupted(exc) from None

    @abstractmethod
    def collect(self, job: Job) -> Path:
        """Bring the outputs into run_dir/work (a remote executor copies them back); that folder."""

    @abstractmethod
    def cancel(self, job: Job) -> None:
        """Stop every process of the job and wait until they are gone."""

    def failure(self, job: Job, codes: list[int]) -> VaultError | None:
        """The executor's own account of a run with failed processes (None: the generic one says it)."""
        return None

    def resume(self, plan: Plan, job_id: str) -> Job:
        """The job of a detached run, to poll and collect later (`vault runs`); only a queueing executor has one."""
        raise UsageError(detail=f"the {self.name} executor cannot resume job {job_id}: its runs end with vault")

    def started(self, job: Job) -> bool:
        """Whether any process of the job has started (a detached run shows as running, not queued)."""
        return True
