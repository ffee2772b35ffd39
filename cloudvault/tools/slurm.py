"""Slurm's command-line client as vault uses it: run a command, submit a script, read a job's array tasks.

`vault index slurm plan` and the repro Slurm executor both go through here. Accounting (`sacct`) is optional on many
clusters, so a job's tasks are read from `scontrol`, which keeps ended jobs for MinJobAge.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
from pathlib import Path

from cloudvault.errors import EnvironmentProblem, ToolMissing, UsageError

CLIENT_HINT = "install Slurm's client tools (slurm-client)"


class SlurmFailed(EnvironmentProblem):
    """{command}: {detail}; Slurm does not answer as expected: check SLURM_CONF and that slurmctld runs (`sinfo`)"""


# Slurm's grammar for each sbatch option vault writes from a recipe or an option (sbatch(1)); a value outside it is
# refused, so nothing a recipe holds can end an #SBATCH line and start a command.
_GRES = r"[A-Za-z0-9_]+(?::[A-Za-z0-9_.-]+)?(?::\d+)?"
SBATCH_GRAMMAR = {
    "time": (r"(?:\d+-)?\d+(?::\d+){0,2}|UNLIMITED|INFINITE", "MINUTES, H:M:S or D-H:M:S, e.g. 01:00:00"),
    "partition": (r"[A-Za-z0-9_.-]+(?:,[A-Za-z0-9_.-]+)*", "partition names, comma-separated"),
    "mem": (r"\d+[KMGT]?", "a size with an optional K, M, G or T, e.g. 16G"),
    "gres": (rf"{_GRES}(?:,{_GRES})*", "NAME[:TYPE][:COUNT], e.g. gpu:1 or gpu:h200:1"),
    "cpus-per-task": (r"[1-9]\d*", "a positive whole number"),
}


class NotSlurmGrammar(UsageError):
    """{where} = {value!r} is not what sbatch --{option} takes ({grammar}); fix it"""


def sbatch_value(option: str, value: object, where: str) -> str:
    """value as text, checked against Slurm's grammar for --option (NotSlurmGrammar, exit 2, naming where)."""
    pattern, grammar = SBATCH_GRAMMAR[option]
    text = str(value)
    if isinstance(value, bool) or not re.fullmatch(pattern, text):
        raise NotSlurmGrammar(where=where, value=text, option=option, grammar=grammar)
    return text


def sbatch_path(option: str, path: str | os.PathLike) -> str:
    """An #SBATCH line for a path (--output, --chdir): double-quoted, as sbatch reads a quoted argument; a path
    sbatch cannot read back whole (a newline, a double quote, a backslash) is refused."""
    text = os.fspath(path)
    if any(c in text for c in '\n\r"\\'):
        raise UsageError(detail=f"{text!r} cannot be written into an #SBATCH line; choose a folder without newlines, "
                         "double quotes or backslashes")  # fmt: skip
    return f'#SBATCH --{option}="{text}"'


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


# A job in any of these states is still Slurm's: pending, running, or ending (COMPLETING, STAGE_OUT: its processes or
# its burst-buffer output have not finished); anything else (COMPLETED, FAILED, CANCELLED, TIMEOUT ...) has ended.
ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
                    "RESIZING", "STAGE_OUT", "SIGNALING"})  # fmt: skip


def is_active(state: str) -> bool:
    """Whether a state ('RUNNING', 'PENDING (Dependency)') is one of a job still in Slurm's hands."""
    return state.split()[0] in ACTIVE if state.strip() else False


def state_text(fields: dict[str, str]) -> str:
    """scontrol's JobState, with its Reason when there is one: 'PENDING (Dependency)'."""
    reason = fields.get("Reason", "None")
    return fields.get("JobState", "UNKNOWN") + (f" ({reason})" if reason not in ("None", "") else "")


def task_states(job: str, *, timeout: float = 60, hint: str = CLIENT_HINT) -> dict[int, tuple[str, int]]:
    """array task index -> (Slurm state, exit code) as scontrol knows them; {} once Slurm has forgotten the job."""
    return {index: (fields.get("JobState", "UNKNOWN"), int(fields.get("ExitCode", "0:0").split(":")[0] or 0))
            for index, fields in job_tasks(job, timeout=timeout, hint=hint).items()}  # fmt: skip


def job_states(job: str | None) -> dict[int, str]:
    """array task index (0 for a plain job) -> state, from scontrol (pending, running and recently ended);
    sacct, when accounting answers, for tasks scontrol has forgotten."""
    if not job:
        return {}
    states = {index: state_text(fields) for index, fields in job_tasks(job).items()}
    try:
        for line in run(["sacct", "-n", "-P", "-X", "-j", job, "-o", "JobID,State"]).splitlines():
            jid, _, state = line.partition("|")
            _, sep, index = jid.partition("_")
            if sep and not index.isdigit():  # '45_[1-2]': pending tasks, which scontrol lists one by one
                continue
            states.setdefault(int(index) if sep else 0, state.split()[0] if state else "UNKNOWN")
    except (SlurmFailed, ToolMissing):
        pass  # accounting is off on many clusters (and on the test one): scontrol's view is all there is
    return states


def has_started(states: dict[int, tuple[str, int]]) -> bool:
    """Whether any task of task_states' answer has left the queue (PENDING): a detached run is running, not queued."""
    return any(state != "PENDING" for state, _ in states.values())


def outcome(states: dict[int, tuple[str, int | None]]) -> str:
    """An ended job's word on itself from task_states' answer: 'COMPLETED' when every task completed, else the other
    states its tasks ended in ('FAILED,TIMEOUT'); a job Slurm has forgotten says so."""
    bad = sorted({s for s, _ in states.values() if s != "COMPLETED"})
    return ",".join(bad) if bad else ("COMPLETED" if states else "ended (Slurm no longer lists it)")


def queued(job: str | None, *, timeout: float = 60, hint: str = CLIENT_HINT) -> str | None:
    """The state of a task of the job that is still active ('PENDING (Dependency)'), else None: ended, or forgotten."""
    if not job:
        return None
    tasks = job_tasks(job, timeout=timeout, hint=hint).values()
    active = [state_text(fields) for fields in tasks if is_active(fields.get("JobState", ""))]
    return active[0] if active else None


def cancel(job: str, *, wait_s: float = 0, timeout: float = 60, hint: str = CLIENT_HINT) -> None:
    """scancel the job (one already ended or forgotten is what we want); with wait_s, until no task is active."""
    import time

    with contextlib.suppress(SlurmFailed):
        run(["scancel", job], tolerate_invalid=True, timeout=timeout, hint=hint)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and queued(job, timeout=timeout, hint=hint):
        time.sleep(0.5)
