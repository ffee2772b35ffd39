"""Slurm's command-line client as vault uses it: run a command, submit a script, read a job's array tasks.

`vault index --slurm` and the repro Slurm executor both go through here. Accounting (`sacct`) is optional on many
clusters, so a job's tasks are read from `scontrol`, which keeps ended jobs for MinJobAge.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

from cloudvault.errors import EnvironmentProblem, ToolMissing

CLIENT_HINT = "install Slurm's client tools (slurm-client)"


class SlurmFailed(EnvironmentProblem):
    """{command}: {detail}; Slurm does not answer as expected: check SLURM_CONF and that slurmctld runs (`sinfo`)"""


def run(argv: list[str], *, tolerate_invalid: bool = False, timeout: float = 60, hint: str = CLIENT_HINT) -> str:
    """A Slurm command's stdout; a missing tool is ToolMissing, a failure SlurmFailed with Slurm's words.
    tolerate_invalid: a job Slurm no longer knows ("Invalid job id") is an empty answer, not a failure."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=os.environ)
    except FileNotFoundError:
        raise ToolMissing(tool=argv[0], hint=hint) from None
    except subprocess.TimeoutExpired:
        raise SlurmFailed(command=argv[0], detail=f"no answer in {timeout:g} s") from None
    if done.returncode:
        said = (done.stderr or done.stdout).strip().splitlines()
        if tolerate_invalid and said and "Invalid job id" in said[-1]:
            return ""
        raise SlurmFailed(command=shlex.join(argv[:2]), detail=said[-1] if said else f"exit {done.returncode}")
    return done.stdout


def sbatch(script: Path, *options: str, timeout: float = 60, hint: str = CLIENT_HINT) -> str:
    """Submit script; its job id (sbatch --parsable)."""
    out = run(["sbatch", "--parsable", *options, str(script)], timeout=timeout, hint=hint)
    job = out.strip().split(";")[0]
    if not job.isdigit():
        raise SlurmFailed(command="sbatch", detail=f"answered {out.strip()!r}, not a job id")
    return job


def task_range(text: str) -> list[int]:
    """'3' -> [3]; '2-7', '2-7%4' or '1,3-4' (pending tasks of an array, as scontrol prints them) -> each index."""
    found = []
    for part in text.split("%")[0].split(","):
        low, _, high = part.partition("-")
        if low.isdigit():
            found += range(int(low), int(high or low) + 1)
    return found


def job_tasks(job: str, *, timeout: float = 60, hint: str = CLIENT_HINT) -> dict[int, dict[str, str]]:
    """array task index (0 for a plain job) -> scontrol's fields (JobState, Reason, ExitCode ...); {} once Slurm
    has forgotten the job."""
    tasks: dict[int, dict[str, str]] = {}
    text = run(["scontrol", "-o", "show", "job", job], tolerate_invalid=True, timeout=timeout, hint=hint)
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        for index in task_range(fields.get("ArrayTaskId", "0")):
            tasks[index] = fields
    return tasks


def in_queue(job: str, *, timeout: float = 60, hint: str = CLIENT_HINT) -> bool:
    """Whether squeue still lists any task of the job."""
    return bool(run(["squeue", "-h", "-j", job, "-o", "%i"], tolerate_invalid=True, timeout=timeout, hint=hint).strip())
