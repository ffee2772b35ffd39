"""The Slurm executor: one sbatch job array (one array task per process of the plan, so per GPU), rendered from the
recipe's [run] and [slurm] sections, submitted with --parsable and waited for by polling `scontrol show job`
(accounting may be off, so never sacct); Ctrl-C cancels it with scancel and waits until squeue no longer lists it.

The run folder must be on storage the compute nodes share: each task writes its logs (logs/NAME.out, .err) and
its exit code (logs/NAME.exit) there, and its outputs into run_dir/work, so collect has nothing to copy back.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from cloudvault.atomic import write_text
from cloudvault.errors import EnvironmentProblem, ToolMissing
from cloudvault.repro.executors.base import Executor, Job
from cloudvault.repro.plan import Plan
from cloudvault.repro.preflight import Check
from cloudvault.tools import slurm as slurm_client

POLL_S = 1.0
MAX_MISSES = 5  # consecutive unanswered polls before a waited run gives up (the job itself runs on)
HINT = "install Slurm's client tools (slurm-client) or use --executor local"
ASK_TIMEOUT_S = 60.0  # Slurm's own tools retry a missing config or controller for 60 s
CANCEL_WAIT_S = 60.0
SCRIPT = "job.sbatch"


class SlurmJobFailed(EnvironmentProblem):
    """slurm job {job_id} {state}: {failed} of {total} task(s) failed (exit codes {codes}); last log lines: {tail}"""


class SlurmExecutor(Executor):
    name = "slurm"
    queues = True
    job_label = "Slurm job"
    runs_here = False  # the job runs on the partition's nodes: this host's GPUs do not matter
    poll_s = POLL_S

    def __init__(self, partition: str | None = None, ask_timeout: float = ASK_TIMEOUT_S) -> None:
        self.partition, self.ask_timeout = partition, ask_timeout
        self._misses = 0  # consecutive polls Slurm did not answer

    @property
    def options(self) -> dict:
        return {"partition": self.partition}

    def describe(self, plan: Plan) -> list[str]:
        lines = [f"sbatch --parsable {plan.run_dir / SCRIPT}   # {len(plan.processes)} array task(s)"]
        lines += [line for line in render(plan, self.partition).splitlines() if line.startswith("#SBATCH")]
        logs = plan.run_dir / "logs"
        lines += [f"task {i} runs {p.name}'s command; logs {logs}/{p.name}.out .err .exit"
                  for i, p in enumerate(plan.processes)]  # fmt: skip
        return lines

    def preflight(self, plan: Plan) -> list[Check]:
        """sinfo answers and the partition exists (and has GPUs when the plan needs them); this host's GPUs do not
        matter, the job runs on the partition's nodes."""
        partition = resources(plan, self.partition)["partition"]
        try:
            found = slurm_client.run(["sinfo", "-h", "-o", "%P|%G"] + (["-p", partition] if partition else []),
                                     timeout=self.ask_timeout, hint=HINT)
        except (ToolMissing, slurm_client.SlurmFailed) as exc:
            return [Check("slurm", False, exc.message)]
        rows = [line.split("|") for line in found.splitlines() if line.strip()]
        if not rows:
            return [Check("slurm", False, f"partition {partition!r} does not exist (`sinfo` lists the partitions)")]
        name = rows[0][0].rstrip("*")
        gpus = any("gpu" in gres for _, gres in rows)
        wanted = _gpu_processes(plan)
        has = f"partition {name} {'has' if gpus else 'has no'} GPUs (gres {rows[0][1]})"
        gpu = (Check("gpu", True, "not needed" + (" (stand-in)" if plan.standin else "")) if not wanted else
               Check("gpu", gpus, f"{has}; {len(wanted)} task(s) want one each"))  # fmt: skip
        return [Check("slurm", True, f"sinfo answers; partition {name} exists"), gpu]

    def submit(self, plan: Plan) -> Job:
        logs = plan.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        (plan.run_dir / "work").mkdir(exist_ok=True)
        script = plan.run_dir / SCRIPT
        write_text(script, render(plan, self.partition))
        job_id = slurm_client.sbatch(script, timeout=self.ask_timeout, hint=HINT)
        return Job(plan, [None] * len(plan.processes), job_id=job_id)

    def resume(self, plan: Plan, job_id: str) -> Job:
        return Job(plan, [None] * len(plan.processes), job_id=job_id)

    def poll(self, job: Job) -> list[int] | None:
        """The tasks' exit codes once every task has ended; None while any is active. A controller that does not
        answer a few polls in a row (a restart) is asked again; then SlurmFailed."""
        try:
            states = slurm_client.task_states(job.job_id, timeout=self.ask_timeout, hint=HINT)
        except slurm_client.SlurmFailed:
            self._misses += 1
            if self._misses >= MAX_MISSES:
                raise
            time.sleep(POLL_S * 4)
            return None
        self._misses = 0
        if any(slurm_client.is_active(state) for state, _ in states.values()):
            return None
        for i, p in enumerate(job.plan.processes):
            exit_file = job.plan.run_dir / "logs" / f"{p.name}.exit"
            if exit_file.is_file():
                job.codes[i] = int(exit_file.read_text().strip() or 1)
            else:  # killed before the command ended (cancelled, out of time or memory): Slurm's word only
                state, code = states.get(i, ("UNKNOWN", None))
                job.codes[i] = code if code else 1
        job.state = slurm_client.outcome(states)
        return [int(c) for c in job.codes]

    def started(self, job: Job) -> bool:
        return slurm_client.has_started(slurm_client.task_states(job.job_id, timeout=self.ask_timeout, hint=HINT))

    def collect(self, job: Job) -> Path:
        return job.plan.run_dir / "work"  # the tasks wrote there, on shared storage

    def cancel(self, job: Job) -> None:
        if not job.job_id:
            return
        slurm_client.cancel(job.job_id, wait_s=CANCEL_WAIT_S, timeout=30, hint=HINT)

    def failure(self, job: Job, codes: list[int]) -> SlurmJobFailed | None:
        """A job with a failed task, naming its Slurm state and the failed task's last log lines."""
        bad = [(p, c) for p, c in zip(job.plan.processes, codes, strict=True) if c]
        if not bad:
            return None
        tail = log_tail(job.plan.run_dir / "logs", bad[0][0].name)
        return SlurmJobFailed(job_id=job.job_id, state=job.state or "FAILED", failed=len(bad), total=len(codes),
                              codes=sorted({c for _, c in bad}), tail=tail)  # fmt: skip


def log_tail(logs: Path, name: str, lines: int = 3) -> str:
    """The last lines of a task's stderr (else its stdout or Slurm's own log), joined on one line."""
    for path in (logs / f"{name}.err", logs / f"{name}.out", *sorted(logs.glob("slurm-*.out"))):
        if path.is_file() and (text := path.read_text(errors="replace").strip()):
            return " | ".join(text.splitlines()[-lines:])
    return "(no log output)"


def resources(plan: Plan, partition: str | None = None) -> dict:
    """What each array task asks for: the recipe's [slurm] section, one GPU and the recipe's cores per GPU task
    (the stand-in: one core, no GPU); partition from --partition, else the recipe, else Slurm's default."""
    section = plan.recipe.section("slurm")
    gpu = bool(_gpu_processes(plan))
    cores = plan.recipe.section("run").get("cpu_cores_per_gpu", 0) if gpu else 0
    wanted = {
        "partition": (partition, "--partition") if partition else (section.get("partition"), "slurm.partition"),
        "cpus": (section.get("cpus_per_task", cores or 1), "slurm.cpus_per_task"),
        "mem": (section.get("mem", "1G" if plan.standin else None), "slurm.mem"),
        "time": (section.get("time", "01:00:00"), "slurm.time"),
        "gres": (section.get("gres", "gpu:1"), "slurm.gres"),
    }
    options = {"cpus": "cpus-per-task"}
    found = {key: None if value is None else slurm_client.sbatch_value(options.get(key, key), value, _where(plan, what))
             for key, (value, what) in wanted.items()}  # fmt: skip
    return {**found, "gres": found["gres"] if gpu else None}  # every field is checked, used or not


def _where(plan: Plan, what: str) -> str:
    return what if what.startswith("--") else f"recipe {plan.recipe.path}: {what}"


def render(plan: Plan, partition: str | None = None) -> str:
    """The sbatch script: one array task per process, each writing its logs and exit code under run_dir/logs."""
    res = resources(plan, partition)
    logs = plan.run_dir / "logs"
    head = ["#!/bin/bash", slurm_client.sbatch_path("job-name", f"vault-{plan.recipe.name}"),
            f"#SBATCH --array=0-{len(plan.processes) - 1}", "#SBATCH --ntasks=1",
            f"#SBATCH --cpus-per-task={res['cpus']}", f"#SBATCH --time={res['time']}",
            slurm_client.sbatch_path("output", f"{logs}/slurm-%A_%a.out"),
            slurm_client.sbatch_path("chdir", plan.run_dir)]  # fmt: skip
    head += [f"#SBATCH --partition={res['partition']}"] if res["partition"] else []
    head += [f"#SBATCH --mem={res['mem']}"] if res["mem"] else []
    head += [f"#SBATCH --gres={res['gres']}"] if res["gres"] else []
    body = ['case "$SLURM_ARRAY_TASK_ID" in']
    for i, p in enumerate(plan.processes):
        # Slurm sets CUDA_VISIBLE_DEVICES to the GPU it gave the task; the plan's local index would be wrong there
        env = {k: v for k, v in p.env.items() if not (res["gres"] and k == "CUDA_VISIBLE_DEVICES")}
        command = shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), *p.argv])
        cwd, log = shlex.quote(p.cwd), shlex.quote(str(logs / p.name))
        body.append(f"  {i}) name={p.name}; mkdir -p {cwd} && cd {cwd} && {command} >{log}.out 2>{log}.err ;;")
    body += ['  *) echo "no task $SLURM_ARRAY_TASK_ID" >&2; exit 2 ;;', "esac"]
    # the exit code lands on shared storage, renamed into place: it outlives the job in Slurm's memory (MinJobAge)
    where = shlex.quote(str(logs))
    tail = ["code=$?", f'echo "$code" >{where}/"$name".exit.tmp && mv {where}/"$name".exit.tmp {where}/"$name".exit',
            'exit "$code"']  # fmt: skip
    return "\n".join([*head, "", "set -u", *body, *tail]) + "\n"


def _gpu_processes(plan: Plan) -> list:
    return [] if plan.standin else [p for p in plan.processes if p.gpu is not None]


