"""`vault index slurm plan`: index a mirror's archives across a Slurm cluster, with Slurm itself as the engine.

The plan bin-packs the archives that need reading by compressed size, largest first, into N tasks and is written
with its hash beside the catalog (`catalog.db.slurm/plan.json`). One sbatch job array runs one task per bin
(`python -m cloudvault.index.slurm_task PLAN TASK`): each scans its archives into one self-contained shard on
node-local scratch and renames it into `catalog.db.slurm/shards/`, never opening the catalog. A merge job
(`python -m cloudvault.index.slurm_merge CATALOG`, `--dependency=afterok:ARRAY --kill-on-invalid-dep=yes`; or
`vault index slurm merge` by hand) takes the writer lock, checks every shard against the plan, commits each archive
from its shard with the same code a local `vault index` uses, then indexes the rest of the mirror (plain files,
anything changed since the plan) locally.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import shlex
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cloudvault import errors
from cloudvault.archive.formats import OPENED
from cloudvault.atomic import atomic_write
from cloudvault.catalog import shards
from cloudvault.index.plan import is_archive
from cloudvault.index.roots import MirrorRoot
from cloudvault.index.secrets import SecretRules
from cloudvault.index.slurm_results import (
    AlreadyMerged,
    Measured,
    NothingToSubmit,
    SimulatedWall,
    SlurmDryRun,
    SlurmStatus,
    Submitted,
    TaskStatus,
)
from cloudvault.index.walk import archive_formats
from cloudvault.models import FileStat
from cloudvault.readers import NUMBER, OPTIONAL, DamagedFile, json_file
from cloudvault.tools import slurm as slurm_client
from cloudvault.tools.mirrorfs import WalkProblem
from cloudvault.tools.slurm import SlurmFailed, sbatch

PLAN_VERSION = 1
TASK_MEM = "1G"  # a task holds one archive's decoding buffers (~60 MB) and Python


class NoPlan(errors.NotFound):
    """no Slurm index plan for {catalog}; start one with `vault index slurm plan --tasks N MIRROR`"""


class SlurmBusy(errors.EnvironmentProblem):
    """Slurm job {job} of this catalog's index is still {state}; `vault index slurm status` follows it (scancel {job} \
stops it)"""


class ShardsMissing(errors.EnvironmentProblem):
    """task(s) {tasks} of plan {plan} have no shard yet (running, failed or cancelled: `vault index slurm status`; \
`vault index slurm resume` runs them again); nothing was merged"""


class ShardRefused(errors.IntegrityError):
    """shard {shard} refused: {why}; nothing was merged (`vault index slurm resume` scans its task again)"""


@dataclass(frozen=True)
class Layout:
    """Where a catalog's Slurm index lives: beside the catalog, on the storage every node shares."""

    catalog: Path

    @property
    def folder(self) -> Path:
        return self.catalog.with_name(self.catalog.name + ".slurm")

    @property
    def plan(self) -> Path:
        return self.folder / "plan.json"

    @property
    def jobs(self) -> Path:
        return self.folder / "jobs.json"

    @property
    def merged(self) -> Path:
        return self.folder / "merged.json"

    def shard(self, task: int) -> Path:
        return self.folder / "shards" / f"task-{task:04d}.db"

    def progress(self, task: int) -> Path:
        return self.folder / "shards" / f"task-{task:04d}.progress.json"


# -- the plan (pure) -----------------------------------------------------------------------------------------
def pack(sizes: list[int], bins: int) -> list[list[int]]:
    """Indexes of sizes bin-packed largest first, each into the bin with the fewest bytes (ties: the lowest
    bin); at most one bin per item, none empty."""
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    heap = [(0, b) for b in range(min(bins, len(sizes)))]
    packed: list[list[int]] = [[] for _ in heap]
    for i in order:
        load, b = heapq.heappop(heap)
        packed[b].append(i)
        heapq.heappush(heap, (load + sizes[i], b))
    return packed


def plan_hash(plan: dict) -> str:
    body = {k: v for k, v in plan.items() if k != "hash"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def make_plan(catalog: Path, roots: list[dict], archives: list[tuple[str, FileStat]], tasks: int,
              definition: str | None) -> dict:  # fmt: skip
    """The deterministic plan: the same mirror state and task count give the same plan and hash."""
    archives = sorted(archives, key=lambda a: (a[0], a[1].path))
    bins = pack([st.size for _, st in archives], tasks)
    plan = {
        "version": PLAN_VERSION,
        "catalog": str(catalog),
        "definition": definition,
        "roots": roots,
        "tasks": [
            {"bytes": sum(archives[i][1].size for i in b), "archives": [_archive_doc(*archives[i]) for i in b]}
            for b in bins
        ],
    }
    plan["hash"] = plan_hash(plan)
    return plan


def _archive_doc(root: str, st: FileStat) -> dict:
    doc = st._asdict()
    doc["raw_path"] = st.raw_path.hex() if st.raw_path is not None else None
    return {"root": root, **doc}


def task_archives(plan: dict, task: int) -> list[tuple[str, FileStat]]:
    """(mirror root, stat as planned) of each archive of a task."""
    found = []
    for doc in plan["tasks"][task]["archives"]:
        fields = {k: v for k, v in doc.items() if k != "root"}
        raw = fields["raw_path"]
        found.append((doc["root"], FileStat(**{**fields, "raw_path": bytes.fromhex(raw) if raw else None})))
    return found


def plan_archives(mroots: list[MirrorRoot], known: dict[str, dict]) -> tuple[list, list]:
    """(archives a local index would read now, every archive), each as (mirror root, stat); names holding a
    credential are left to the merge, which indexes them as a local run does."""
    to_read, every = [], []
    for mroot in mroots:
        rules = SecretRules(mroot.definition.secrets)
        recorded = known.get(mroot.definition.name, {})
        candidates = [item for item in mroot.mirror.walk() if not isinstance(item, WalkProblem)
                      and item.kind == "file" and is_archive(item.path) and not rules.found_in(item.path)]  # fmt: skip
        formats = archive_formats(mroot.mirror, candidates)
        for item in candidates:
            if formats.get(item.path) not in OPENED:
                continue
            every.append((mroot.mirror.root, item))
            if recorded.get(item.path) != item.signature:
                to_read.append((mroot.mirror.root, item))
    return to_read, every


def root_docs(mroots: list[MirrorRoot]) -> list[dict]:
    return [{"root": m.mirror.root, "name": m.definition.name, "secrets": m.definition.secrets} for m in mroots]


def load_plan(path: Path) -> dict:
    """A plan file, its hash checked (a plan edited by hand is refused)."""
    try:
        plan = json_file(path, PLAN_SHAPE)
    except FileNotFoundError:
        raise NoPlan(catalog=path.parent.with_suffix("")) from None  # catalog.db.slurm/plan.json -> catalog.db
    if not all(isinstance(t, dict) and isinstance(t.get("archives"), list) and isinstance(t.get("bytes"), int)
               for t in plan["tasks"]):  # fmt: skip
        raise DamagedFile(path=str(path), detail="a task is not {bytes, archives}")
    if plan.get("version") != PLAN_VERSION or plan.get("hash") != plan_hash(plan):
        raise errors.IntegrityError(detail=f"{path} does not match its hash (edited?); plan again with --slurm N")
    return plan


# -- scripts -------------------------------------------------------------------------------------------------
def render_array(lay: Layout, plan: dict, partition: str | None) -> str:
    """The job array: one task per bin of the plan."""
    head = _sbatch_head(f"vault-index-{plan['hash'][:8]}", lay.folder / "logs" / "task-%a.out", partition,
                        lay.folder)  # fmt: skip
    head.insert(2, f"#SBATCH --array=0-{len(plan['tasks']) - 1}")
    command = shlex.join([sys.executable, "-P", "-m", "cloudvault.index.slurm_task", str(lay.plan)])
    return "\n".join([*head, "", f'exec {command} "$SLURM_ARRAY_TASK_ID"']) + "\n"


def render_merge(lay: Layout, plan: dict, partition: str | None) -> str:
    """The merge job: the private entry point index/slurm_merge.py (what `vault index slurm merge` does), waiting for
    any other writer of the catalog; never the public grammar, which a later vault may spell otherwise."""
    name = f"vault-index-merge-{plan['hash'][:8]}"
    head = _sbatch_head(name, lay.folder / "logs" / "merge-%j.out", partition, lay.folder)
    command = [sys.executable, "-P", "-m", "cloudvault.index.slurm_merge", str(lay.catalog)]
    return "\n".join([*head, "", f"exec {shlex.join(command)}"]) + "\n"


def _sbatch_head(name: str, output: Path, partition: str | None, folder: Path) -> list[str]:
    """Run from vault's own folder with `python -P`: the folder a job was submitted from (a clone of this
    repository, say) is never on its sys.path to shadow the installed package."""
    head = ["#!/bin/bash", f"#SBATCH --job-name={name}", "#SBATCH --ntasks=1", "#SBATCH --cpus-per-task=1",
            f"#SBATCH --mem={TASK_MEM}", slurm_client.sbatch_path("output", output),
            slurm_client.sbatch_path("chdir", folder)]  # fmt: skip
    if partition:
        head.append(f"#SBATCH --partition={slurm_client.sbatch_value('partition', partition, '--partition')}")
    return head


# -- shards --------------------------------------------------------------------------------------------------
def shard_problem(lay: Layout, plan: dict, task: int) -> str | None:
    """Why the task's shard cannot be merged ('missing' when there is none), or None when it checks out:
    made for this plan and task, holding exactly the planned archives, with every member row, and every table
    (flags too) as its task recorded it."""
    path = lay.shard(task)
    if not path.is_file():
        return "missing"
    try:
        meta, archives = shards.read_shard(str(path), check_digests=True)
    except (sqlite3.Error, OSError) as exc:  # a damaged shard file is refused, never merged
        return f"unreadable ({exc})"
    if meta.get("plan_hash") != plan["hash"]:
        return f"made for plan {meta.get('plan_hash', '?')[:12]}, not the current plan {plan['hash'][:12]}"
    if meta.get("task") != str(task):
        return f"made for task {meta.get('task')}, not task {task}"
    planned = task_archives(plan, task)
    found = [(root, st) for root, st, _, _ in archives]
    if found != planned:
        return f"holds {len(found)} archive(s), the plan gives task {task} {len(planned)} (or other ones)"
    if sum(st.size for _, st in found) != plan["tasks"][task]["bytes"]:
        return "its archives' bytes differ from the plan's"
    short = [st.path for _, st, count, rows in archives if count != rows]
    if short:
        return f"member rows missing for {short[0]}"
    return meta["digest_problem"] or None


def shard_states(lay: Layout, plan: dict) -> dict[int, str | None]:
    return {task: shard_problem(lay, plan, task) for task in range(len(plan["tasks"]))}


def remove_stale_shards(lay: Layout, plan: dict) -> None:
    """Shards of another plan, of tasks this plan lacks, or refused: vault's own files, made again by the tasks
    (progress files stay: they name their plan, and --status reads only the current plan's)."""
    folder = lay.folder / "shards"
    for path in folder.glob("task-*") if folder.is_dir() else ():
        task = int(path.name[5:9]) if path.name[5:9].isdigit() else -1
        keep = 0 <= task < len(plan["tasks"]) and shard_problem(lay, plan, task) in (None, "missing")
        if not keep and path.suffix == ".db":
            path.unlink(missing_ok=True)


def write_json(path: Path, doc: dict) -> None:
    with atomic_write(path, force=True) as fh:
        fh.write(json.dumps(doc, indent=1).encode())


# the shapes of the files `vault index --slurm` keeps beside the catalog (readers.check_shape)
PLAN_SHAPE = {"required": ("version", "hash", "tasks", "roots", "catalog"), "version": int, "hash": str,
              "tasks": list, "roots": list, "catalog": str, "definition": (str, OPTIONAL)}  # fmt: skip
JOBS_SHAPE = {"plan": str, "array": (str, OPTIONAL), "merge": (str, OPTIONAL), "tasks": list,
              "partition": (str, OPTIONAL), "submitted_at": str}  # fmt: skip
MERGED_SHAPE = {"plan": str, "at": str, "already": bool, "shards": int, "from_shards": int}
PROGRESS_SHAPE = {"plan_hash": str, "task": int, "archives": int, "bytes": int, "seconds": NUMBER}
SHAPES = {"jobs.json": JOBS_SHAPE, "merged.json": MERGED_SHAPE}


def read_json(path: Path) -> dict:
    """jobs.json, merged.json or a task's progress file, checked ({} when there is none); a damaged one is
    DamagedFile naming it."""
    return json_file(path, SHAPES.get(path.name, PROGRESS_SHAPE), missing={})


# -- plan and submit, resume, status -------------------------------------------------------------------------
@dataclass(frozen=True)
class SlurmOptions:
    """`vault index slurm plan`'s options: the mirrors (roots or names) and definition, the tasks, the partition,
    --dry-run and the filesystem bandwidth the simulation assumes (--fs-gbps)."""

    mirrors: tuple[str, ...]
    definition: str | None
    tasks: int
    partition: str | None = None
    dry_run: bool = False
    fs_gbps: float | None = None


def plan_and_submit(catalog: Path, options: SlurmOptions) -> SlurmDryRun | Submitted | NothingToSubmit:
    """Plan the archives a local index would read into options.tasks tasks, then submit the array and the merge
    (or, dry run, say what would be submitted and simulate the wall time; a dry run before the first index plans
    against an empty catalog and leaves none behind)."""
    import contextlib
    import tempfile

    from cloudvault.catalog import files as catalog_files
    from cloudvault.catalog.db import open_catalog
    from cloudvault.catalog.mirror_guard import refuse_catalog_inside_mirror
    from cloudvault.index.roots import roots_to_index

    refuse_catalog_inside_mirror(catalog, [m for m in options.mirrors if "://" not in m])
    definition = options.definition
    if definition and definition.endswith(".toml"):  # the merge job resolves it from another folder
        definition = str(Path(definition).resolve())
    fresh = options.dry_run and not catalog.exists()
    with tempfile.TemporaryDirectory(prefix="vault-plan-") if fresh else contextlib.nullcontext() as folder:
        conn = open_catalog(Path(folder) / "empty.db" if folder else catalog, create=True)
        try:
            mroots = roots_to_index(conn, list(options.mirrors), definition)
            known = {m.definition.name: catalog_files.archive_signatures(conn, m.definition.name) for m in mroots}
            recorded = list(catalog_files.recorded_archive_sizes(conn, [m.definition.name for m in mroots]))
        finally:
            conn.close()
    to_read, every = plan_archives(mroots, known)
    plan = make_plan(catalog, root_docs(mroots), to_read, options.tasks, definition)
    lay = Layout(catalog)
    if options.dry_run:
        return dry_run(lay, plan, options.tasks, options.partition, options.fs_gbps, recorded, every)
    if not plan["tasks"]:
        return NothingToSubmit(plan["hash"])
    return submit(lay, plan, options.partition)


# -- submit, resume, status ----------------------------------------------------------------------------------
def submit(lay: Layout, plan: dict, partition: str | None) -> Submitted:
    """Write the plan and scripts, then submit the tasks whose shards are not already there (a plan identical
    to the last one keeps its shards) and the merge, dependent on them."""
    _refuse_if_queued(lay)
    lay.folder.mkdir(mode=0o700, exist_ok=True)
    (lay.folder / "shards").mkdir(exist_ok=True)
    (lay.folder / "logs").mkdir(exist_ok=True)
    if read_json(lay.merged).get("plan") != plan["hash"]:
        lay.merged.unlink(missing_ok=True)
    write_json(lay.plan, plan)
    remove_stale_shards(lay, plan)
    return _submit_jobs(lay, plan, partition, [t for t, why in shard_states(lay, plan).items() if why])


def resume(lay: Layout, partition: str | None) -> Submitted | AlreadyMerged:
    """Submit again only the tasks whose shards are missing or refused, then a merge dependent on them."""
    plan = load_plan(lay.plan)
    if read_json(lay.merged).get("plan") == plan["hash"]:
        return AlreadyMerged(plan["hash"])
    jobs = read_json(lay.jobs)
    if state := slurm_client.queued(jobs.get("array")):
        raise SlurmBusy(job=jobs["array"], state=state.lower())
    todo = [t for t, why in shard_states(lay, plan).items() if why]
    if todo and jobs.get("merge") and slurm_client.queued(jobs["merge"]):  # ours, waiting on tasks that failed
        slurm_client.cancel(jobs["merge"])
    _refuse_if_queued(lay)  # a merge with every shard ready is left to run
    remove_stale_shards(lay, plan)
    return _submit_jobs(lay, plan, partition or jobs.get("partition"), todo)


def _refuse_if_queued(lay: Layout) -> None:
    jobs = read_json(lay.jobs)
    for key in ("array", "merge"):
        if state := slurm_client.queued(jobs.get(key)):
            raise SlurmBusy(job=jobs[key], state=state.lower())


def _submit_jobs(lay: Layout, plan: dict, partition: str | None, tasks: list[int]) -> Submitted:
    array_script, merge_script = lay.folder / "job.sbatch", lay.folder / "merge.sbatch"
    array_script.write_text(render_array(lay, plan, partition))
    merge_script.write_text(render_merge(lay, plan, partition))
    array = sbatch(array_script, f"--array={','.join(map(str, tasks))}") if tasks else None
    depend = [f"--dependency=afterok:{array}", "--kill-on-invalid-dep=yes"] if array else []
    merge = sbatch(merge_script, *depend)
    done = Submitted(plan["hash"], array, tuple(tasks), merge, partition, time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    write_json(lay.jobs, done.to_json())
    return done


def status(lay: Layout) -> SlurmStatus:
    """Per task: archives and bytes done (from its shard, or the progress file it keeps while running), MB/s,
    and its state (shard checked, else Slurm's word); the merge job's state, or when the plan was merged."""
    plan = load_plan(lay.plan)
    jobs = read_json(lay.jobs) if read_json(lay.jobs).get("plan") == plan["hash"] else {}
    states, unknown = _states_if_answering(jobs.get("array"))
    merged = read_json(lay.merged)
    merged = merged if merged.get("plan") == plan["hash"] else {}
    rows = []
    for task, why in shard_states(lay, plan).items():
        planned = plan["tasks"][task]
        prog = read_json(lay.progress(task))
        prog = prog if prog.get("plan_hash") == plan["hash"] else {}
        if merged:  # its shard was merged and removed
            state = "merged"
        elif why is None:
            state = "done"
        else:
            state = states.get(task, unknown) if why == "missing" else f"refused: {why}"
        seconds = prog.get("seconds", 0)
        rows.append(TaskStatus(task, len(planned["archives"]), prog.get("archives", 0), planned["bytes"],
                               prog.get("bytes", 0),
                               round(prog.get("bytes", 0) / seconds / 1e6, 1) if seconds else None, state))  # fmt: skip
    merge_state = "merged " + merged["at"] if merged else None
    if merge_state is None:
        found, unknown = _states_if_answering(jobs.get("merge"))
        merge_state = next(iter(found.values()), unknown)
    return SlurmStatus(plan["hash"], plan["catalog"], jobs.get("array"), jobs.get("merge"), merge_state, tuple(rows))


# -- dry run: the plan and a simulated wall time -------------------------------------------------------------
def simulate(task_bytes: list[int], task_bps: float, fs_bps: float | None) -> float:
    """Seconds until the last task ends when every task reads at task_bps, all together at most fs_bps (the
    running tasks share it equally; one that ends leaves its share to the others)."""
    remaining = sorted(b for b in task_bytes if b > 0)
    elapsed = 0.0
    while remaining:
        rate = task_bps if fs_bps is None else min(task_bps, fs_bps / len(remaining))
        step = remaining[0] / rate
        elapsed += step
        remaining = [r - rate * step for r in remaining[1:]]
    return elapsed


def simulation(sizes: list[int], tasks: int, task_bps: float, fs_bps: float | None) -> list[SimulatedWall]:
    """Wall time for 1, 2, 4 ... tasks up to `tasks` (and `tasks` itself), each bin-packed as the plan is."""
    counts = sorted({n for n in (1, 2, 4, 8, 16, 32, 64, 128, 256) if n < tasks} | {tasks})
    one = simulate([sum(sizes)], task_bps, fs_bps)
    rows = []
    for n in counts:
        bins = [sum(sizes[i] for i in b) for b in pack(sizes, n)]
        wall = simulate(bins, task_bps, fs_bps)
        limit = "filesystem" if fs_bps is not None and len(bins) * task_bps > fs_bps else "largest task"
        rows.append(SimulatedWall(n, round(wall, 1), round(one / wall, 2) if wall else 1.0,
                                  limit if n > 1 else "one core"))  # fmt: skip
    return rows


def measure_task_rate(archives: list[tuple[str, FileStat]], rules: dict[str, SecretRules],
                      budget_s: float = 1.0) -> tuple[float, int, int]:  # fmt: skip
    """Compressed bytes per second one task scans, measured with the task's own code on the smallest planned
    archives (until budget_s has passed): (rate, archives scanned, bytes)."""
    import tempfile

    from cloudvault.index.archives import scan_into
    from cloudvault.index.budget import plan_budget

    nbytes, count, started = 0, 0, time.monotonic()
    decoders = plan_budget(None).decoders(1)  # as a task reads: one archive at a time, on the node's cores
    with tempfile.TemporaryDirectory(prefix="vault-measure-") as scratch:
        shard = shards.open_shard(os.path.join(scratch, "measure.db"))
        try:
            for root, st in sorted(archives, key=lambda a: a[1].size):
                scan_into(shard, root, st, rules[root], decoders=decoders)
                nbytes, count = nbytes + st.size, count + 1
                if time.monotonic() - started >= budget_s:
                    break
        finally:
            shard.close()
    seconds = time.monotonic() - started
    return (nbytes / seconds if seconds > 0 else 0.0), count, nbytes


def dry_run(lay: Layout, plan: dict, tasks: int, partition: str | None, fs_gbps: float | None,
            recorded: list[int], every: list[tuple[str, FileStat]]) -> SlurmDryRun:  # fmt: skip
    """What `--slurm N --dry-run` shows: tasks, archives per task, bytes, both scripts, and the simulated wall
    time for the plan's archives (when nothing needs reading: a full re-index of the catalog's recorded archive
    sizes), at a rate measured on the smallest of the mirror's archives (every)."""
    archives = [a for t in range(len(plan["tasks"])) for a in task_archives(plan, t)]
    rules = {doc["root"]: SecretRules(doc["secrets"]) for doc in plan["roots"]}
    rate, measured, measured_bytes = measure_task_rate(archives or every, rules) if archives or every else (0, 0, 0)
    sizes = [st.size for _, st in archives] or recorded
    fs_bps = fs_gbps * 1e9 if fs_gbps else None
    rows = simulation(sizes, tasks, rate, fs_bps) if rate and sizes else []
    return SlurmDryRun(plan, render_array(lay, plan, partition) if plan["tasks"] else None,
                       render_merge(lay, plan, partition) if plan["tasks"] else None,
                       Measured(measured, measured_bytes, round(rate)), fs_gbps, "plan" if archives else "catalog",
                       tuple(rows))  # fmt: skip


def _states_if_answering(job: str | None) -> tuple[dict[int, str], str]:
    """Slurm's view of a job for --status, and what to say of a task it does not list; when Slurm cannot be
    asked from here, the shards alone speak."""
    try:
        return slurm_client.job_states(job), "not queued"
    except (SlurmFailed, errors.ToolMissing) as exc:
        return {}, f"unknown (Slurm: {exc.message.split(';')[0]})"
