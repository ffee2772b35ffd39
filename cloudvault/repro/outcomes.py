"""What `vault repro` and `vault runs` hand the command line: frozen, typed results of a run (judged, or queued), of
a --repeat batch, of a dry run and of --list, and the runs recorded; each one's to_json() is its --json
(docs/commands/repro.md and runs.md say the fields)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cloudvault import errors
from cloudvault.documents import SHOWN_ONLY, Document
from cloudvault.repro.plan import PlanDocument
from cloudvault.repro.preflight import Check


@dataclass(frozen=True)
class RunJudged(Document):
    """One run, compared with the record: its id, its folder, and the comparison (as `vault compare` has it)."""

    run_id: str
    folder: str
    record_folder: str
    comparison: object  # repro/compare.py RunComparison

    @property
    def verdict(self) -> str:
        return self.comparison.verdict

    def to_json(self) -> dict:
        from cloudvault.repro import report

        return {**report.document(self.comparison, self.record_folder, self.run_id), "run_id": self.run_id,
                "folder": self.folder}  # fmt: skip


@dataclass(frozen=True)
class RunQueued(Document):
    """A detached run: its job queued and the run recorded as queued (`vault runs collect` collects it)."""

    run_id: str
    job_id: str
    status: str = "queued"
    entry: str = field(default="", metadata=SHOWN_ONLY)

    exit_code = errors.OK


@dataclass(frozen=True)
class RunBatch(Document):
    """`--repeat N`: each run judged in turn (one run: that run's document alone)."""

    runs: tuple[RunJudged, ...]

    def to_json(self) -> dict:
        if len(self.runs) == 1:
            return self.runs[0].to_json()
        docs = [r.to_json() for r in self.runs]
        return {"runs": docs, "verdicts": [d["verdict"] for d in docs]}

    @property
    def exit_code(self) -> int:
        """0 when every run reproduced the record, else 10."""
        from cloudvault.repro.compare import PASSING

        return errors.OK if all(r.verdict in PASSING for r in self.runs) else errors.REPRO_MISMATCH


@dataclass(frozen=True)
class RecipeListed(Document):
    """One recipe of `--list` and its last run (None when never run)."""

    recipe: str
    entry: str
    kind: str
    description: str
    last_run: str | None
    status: str | None
    verdict: str | None


@dataclass(frozen=True)
class RecipesListed(Document):
    """`--list`: every repro recipe and its last run."""

    recipes: tuple[RecipeListed, ...]

    exit_code = errors.OK

    def to_json(self) -> list:
        return [r.to_json() for r in self.recipes]


@dataclass(frozen=True)
class GpuHere(Document):
    """A GPU of this machine that the plan's processes use: its name, compute capability and memory in use."""

    index: int
    name: str
    compute_cap: str
    sm: str
    memory_used_mib: int | None
    memory_total_mib: int | None


@dataclass(frozen=True)
class DryRun(Document):
    """`--dry-run`: the plan (its document, as provenance.json keeps it), the settings from the catalog, each
    preflight check, why a run here could not compare with a GPU record, the GPUs here the plan uses; for the
    terminal, the plan's commands as processes, where the executor runs them, and the processes' core pins."""

    plan: PlanDocument
    settings: dict
    preflight: tuple[Check, ...]
    not_comparable_here: str | None
    gpus_here: tuple[GpuHere, ...]
    processes: tuple[str, ...] = field(default=(), metadata=SHOWN_ONLY)
    executor: str = field(default="local", metadata=SHOWN_ONLY)
    elsewhere: tuple[str, ...] = field(default=(), metadata=SHOWN_ONLY)  # the executor's lines, when not processes
    pins: tuple[tuple[int, ...], ...] = field(default=(), metadata=SHOWN_ONLY)
    forced: bool = field(default=False, metadata=SHOWN_ONLY)  # --force-preflight

    def to_json(self) -> dict:
        return {**self.plan.to_json(), "settings": self.settings, "preflight": [c._asdict() for c in self.preflight],
                "not_comparable_here": self.not_comparable_here,
                "gpus_here": [g.to_json() for g in self.gpus_here]}  # fmt: skip

    @property
    def failed(self) -> set[str]:
        return {c.name for c in self.preflight if not c.ok}

    @property
    def exit_code(self) -> int:
        """The exit the run would have: 7 when the runner's Python lacks a module (checked first, never forced), 6
        when another check fails and --force-preflight is not given, else 0."""
        if "python" in self.failed:
            return errors.PREREQUISITE
        return errors.ENVIRONMENT if self.failed and not self.forced else errors.OK


@dataclass(frozen=True)
class RunsListed(Document):
    """`vault runs`: the catalog's runs rows (all, or entry's), each one's job label when its executor queues
    (Slurm), and how many detached runs a listing left queued or running (0 after a collect)."""

    runs: tuple  # catalog/records.py Run rows
    job_labels: tuple[str | None, ...] = field(default=(), metadata=SHOWN_ONLY)
    entry: str | None = field(default=None, metadata=SHOWN_ONLY)
    uncollected: int = field(default=0, metadata=SHOWN_ONLY)

    def to_json(self) -> list:
        return [r._asdict() for r in self.runs]

    @property
    def exit_code(self) -> int:
        return errors.OK if self.runs else errors.NOTHING_FOUND


@dataclass(frozen=True)
class RequestVerdict(Document):
    """One request of a run as the catalog recorded it compared: its verdict, where its output first diverged,
    and the detail (the comparison's per-request fields)."""

    request: str
    verdict: str
    first_divergence: int | None
    detail: dict


@dataclass(frozen=True)
class RunRequests(Document):
    """`vault runs --requests RUN_ID`: the run's per-request verdicts."""

    run_id: str
    requests: tuple[RequestVerdict, ...]

    def to_json(self) -> list:
        return [r.to_json() for r in self.requests]

    @property
    def exit_code(self) -> int:
        return errors.OK if self.requests else errors.NOTHING_FOUND
