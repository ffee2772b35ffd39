"""The executor interface: plan -> submit -> wait -> collect, and cancel. Local processes implement it here;
a docker container or a Slurm job array implement the same five methods, so `vault repro` does not change."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from cloudvault.repro.plan import Plan


class Job:
    """What submit returns: enough to wait for, collect and cancel the work (pids, a container id, a job id)."""

    def __init__(self, executor: str, plan: Plan, handles: list, job_id: str | None = None) -> None:
        self.executor, self.plan, self.handles, self.job_id = executor, plan, handles, job_id
        self.codes: list[int | None] = [None] * len(handles)


class Executor(Protocol):
    name: str

    def describe(self, plan: Plan) -> list[str]:
        """What submit would do, one line each (the dry run prints these)."""

    def submit(self, plan: Plan) -> Job:
        """Start every process of the plan; logs go to run_dir/logs/NAME.out and .err."""

    def wait(self, job: Job, on_exit=None) -> list[int]:
        """Block until every process ended; their exit codes. on_exit(name, code, seconds) as each one ends.
        Ctrl-C cancels the job, then raises Interrupted."""

    def collect(self, job: Job) -> Path:
        """Bring the outputs into run_dir/work (a remote executor copies them back); that folder."""

    def cancel(self, job: Job) -> None:
        """Stop every process of the job and wait until they are gone."""
