"""What `vault index slurm plan|status|resume|merge` hand the command line: frozen, typed results whose
to_json() is the mode's --json (docs/commands/index.md says their fields); jobs.json is a Submitted's document."""

from __future__ import annotations

from dataclasses import dataclass

from cloudvault.documents import Document


@dataclass(frozen=True)
class Measured(Document):
    """What one task's code scanned in the dry run's measurement: archives, bytes, and its rate."""

    archives: int
    bytes: int
    bytes_per_s: int


@dataclass(frozen=True)
class SimulatedWall(Document):
    """The simulated wall time of the plan's archives bin-packed into `tasks` tasks."""

    tasks: int
    seconds: float
    speedup: float
    limited_by: str


@dataclass(frozen=True)
class SlurmDryRun(Document):
    """`slurm plan --dry-run`: the plan (its file's document), both job scripts, the measured rate, the simulation."""

    plan: dict
    array_script: str | None
    merge_script: str | None
    measured: Measured
    fs_gbps: float | None
    simulated: str  # "plan", or "catalog": a full re-index of the recorded archives when nothing needs reading
    simulation: tuple[SimulatedWall, ...]

    @property
    def archives(self) -> int:
        return sum(len(t["archives"]) for t in self.plan["tasks"])


@dataclass(frozen=True)
class Submitted(Document):
    """`--slurm N` or `--resume`: the job array (None when no task needed running) and the merge job submitted."""

    plan: str
    array: str | None
    tasks: tuple[int, ...]
    merge: str | None
    partition: str | None
    submitted_at: str


@dataclass(frozen=True)
class AlreadyMerged(Document):
    """`--resume` of a plan merged already: nothing submitted."""

    plan: str
    merged: bool = True
    tasks: tuple[int, ...] = ()
    array: None = None
    merge: None = None


@dataclass(frozen=True)
class NothingToSubmit(Document):
    """`--slurm N` when every archive is indexed as it is now: no plan submitted (a local index reads the rest)."""

    plan: str


@dataclass(frozen=True)
class TaskStatus(Document):
    """One task of the plan: archives and bytes planned and done, its rate, and its state."""

    task: int
    archives: int
    archives_done: int
    bytes: int
    bytes_done: int
    mb_s: float | None
    state: str  # merged, done, refused: WHY, or Slurm's state (PENDING (Priority), RUNNING ...)

    @property
    def finished(self) -> bool:
        return self.state in ("done", "merged")


@dataclass(frozen=True)
class SlurmStatus(Document):
    """`--status`: the plan's jobs, the merge job's state (or when the plan was merged), each task's state."""

    plan: str
    catalog: str
    array: str | None
    merge: str | None
    merge_state: str
    tasks: tuple[TaskStatus, ...]


@dataclass(frozen=True)
class Merged(Document):
    """`--merge`: the plan's shards committed into the catalog and the rest indexed locally (the index report),
    or nothing done when the plan was merged before (info: plan, already, at; and shards, from_shards)."""

    catalog: str
    info: dict
    report: object  # index/context.py IndexReport

    @property
    def already(self) -> bool:
        return self.info["already"]

    @property
    def damaged(self) -> bool:
        return self.report.damaged

    def to_json(self) -> dict:
        return {"catalog": self.catalog, **self.info, **vars(self.report), "damaged": self.report.damaged}
