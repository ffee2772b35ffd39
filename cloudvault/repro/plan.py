"""The full plan of one reproduction: what is staged from the mirror, the processes (command, env, GPU, CPU
cores), the outputs and the compare rules, resolved from a recipe and the catalog before anything runs."""

from __future__ import annotations

import shlex
import sqlite3
import sys
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cloudvault.documents import Document
from cloudvault.errors import NotFound, RecipeInvalid
from cloudvault.repro.recipe import Recipe, expand


class InputMissing(NotFound):
    """recipe {recipe}: input {name!r} ({path} in {entry}) is not in the catalog; index the mirror that holds it"""


class RunOptions(
    namedtuple(
        "RunOptions", "base out_explicit standin env_overrides force_preflight", defaults=(False, False, None, False)
    )
):
    """How the user asked to run: the folder runs go under (and whether --out chose it), --standin, --env
    overrides, --force-preflight."""

    __slots__ = ()


Process = namedtuple("Process", "name argv env gpu cpu_cores cwd")
StagedInput = namedtuple("StagedInput", "name entry_id members base dest single")  # single: one file, dest is it
Plan = namedtuple(
    "Plan",
    "recipe mirror_id entry_id mirror_root settings run_settings record_folder record_files inputs processes "
    "outputs merge rules compare_settings near_tie run_dir standin env docs",
    defaults=(None,),
)


def pinnable(cores: list[int]) -> bool:
    """Whether this machine has every core of a process's pin (the lab's 24g..24g+23 would not fit a 2-core one:
    there the process runs unpinned)."""
    import os

    return bool(cores) and hasattr(os, "sched_getaffinity") and set(cores) <= os.sched_getaffinity(0)


def cores_here() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def build(conn: sqlite3.Connection, recipe: Recipe, run_dir: Path, options: RunOptions) -> Plan:
    """Resolve the recipe against the catalog: settings, staged inputs, processes with their env and cores."""
    from cloudvault.catalog.details import entry_details
    from cloudvault.catalog.query import known_mirrors, resolve_entry

    mirror_id, entry_id, mirror_name = resolve_entry(conn, recipe.entry)
    settings = entry_details(conn, mirror_id, entry_id).settings
    root = next((r for r, (name, _) in known_mirrors(conn).items() if name == mirror_name), "")
    record = recipe.section("record")
    inputs = _inputs(conn, recipe, (mirror_id, entry_id), run_dir, options.standin)
    run = recipe.section("run")
    env = dict(settings.get("env", {})) if run.get("env_from_record") else {}
    context = {"settings": settings, "python": sys.executable, "run": str(run_dir), "out": str(run_dir / "work"),
               "inputs": {i.name: str(i.dest) for i in inputs}, "gpu": ""}  # fmt: skip
    context["model"] = context["inputs"].get("model") or _mirror_path(conn, root, recipe.section("model"), entry_id)
    context["code"] = _mirror_path(conn, root, recipe.section("code"), entry_id)
    docs = docs_summary(read_docs(conn, inputs), settings)
    context["clip_length"] = docs.get("clip_length", settings.get("output_cap", 0))
    env.update({k: expand(v, context, where=f"run.env.{k}", recipe=recipe.path) for k, v in run.get("env", {}).items()})
    env.update(options.env_overrides or {})
    run_settings = {**settings, "env": {**settings.get("env", {}), **env}} if settings.get("env") or env else settings
    rules, compared, near_tie = recipe.compare_config()
    return Plan(
        recipe, mirror_id, entry_id, root, settings, run_settings, record["folder"], list(record.get("files", [])),
        inputs, _processes(conn, recipe, context, settings, env, options.standin),
        list(recipe.section("outputs").get("files", record.get("files", []))),
        dict(recipe.section("outputs").get("merge", {})), rules, compared, near_tie, run_dir, options.standin, env,
        docs,
    )  # fmt: skip


def _mirror_path(conn: sqlite3.Connection, root: str, spec: dict, entry_id: str) -> str:
    """Where a code or model path of the recipe is in the mirror (for the real harness; never written to)."""
    from cloudvault.catalog.query import resolve_entry

    if not spec:
        return ""
    entry = resolve_entry(conn, spec["entry"])[1] if "entry" in spec else entry_id
    return str(PurePosixPath(root) / entry / spec["path"]) if root else spec["path"]


def read_docs(conn: sqlite3.Connection, inputs: list[StagedInput]) -> list[dict]:
    """The documents of the `docs` input (JSON lines: doc_id, role, gpu, prompt_tokens), read through the catalog."""
    import json

    from cloudvault.io.members import MemberReader

    docs = next((i for i in inputs if i.name == "docs" and i.single), None)
    if docs is None:
        return []
    with MemberReader(conn) as reader:
        text = b"".join(reader.open(docs.members[0])).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def docs_summary(docs: list[dict], settings: dict) -> dict:
    """Requests per role, distinct documents, prompt range, and the clip length (longest prompt + output cap)."""
    if not docs:
        return {}
    prompts = [int(d["prompt_tokens"]) for d in docs]
    roles = sorted({d.get("role", "measured") for d in docs})
    cap = int(settings.get("output_cap", 0))
    return {"requests": {r: sum(1 for d in docs if d.get("role", "measured") == r) for r in roles},
            "documents": len({d["doc_id"] for d in docs}), "prompt_tokens": [min(prompts), max(prompts)],
            "gpus": len({d.get("gpu") for d in docs}), "clip_length": max(prompts) + cap}  # fmt: skip


def _inputs(conn, recipe: Recipe, scope: tuple[int, str], run_dir: Path, standin: bool) -> list[StagedInput]:
    """Each input's members (a file, an archive member, or every file under a folder), and where it is staged."""
    from cloudvault.catalog.lookup import EntryMembers
    from cloudvault.catalog.query import resolve_entry

    specs = dict(recipe.section("inputs"))
    if standin and recipe.section("standin").get("model"):
        specs["model"] = recipe.section("standin")["model"]
    folder = PurePosixPath(recipe.section("record")["folder"].strip("/") or ".")
    skip = {str(folder / f) for f in recipe.section("record").get("files", [])}  # a files recipe remakes these
    staged = []
    for name, spec in specs.items():
        mid, eid = scope if "entry" not in spec else resolve_entry(conn, spec["entry"])[:2]
        lookup = EntryMembers(conn, mid, eid, archive=spec.get("archive"))
        path = str(PurePosixPath(spec["path"].strip("/") or "."))
        members = lookup.exact(path) if path != "." else []
        base = str(PurePosixPath(path).parent) if members else path
        if not members:
            pattern = "*" if path == "." else f"{path}/*"
            members = [m for m in lookup.glob(pattern) if m.type == "file" and m.path not in skip]
        members = _without_secrets(conn, members, mid, eid)
        if not members:
            raise InputMissing(recipe=recipe.name, name=name, path=path, entry=eid)
        to = run_dir / spec.get("to", f"inputs/{PurePosixPath(path).name}")
        dest = Path(within_run(conn, run_dir, to, f"inputs.{name}.to", recipe))
        staged.append(StagedInput(name, eid, members, "" if base == "." else base, dest, base != path))
    return staged


def within_run(conn: sqlite3.Connection, run_dir: Path, path: str | Path, what: str, recipe: Recipe) -> str:
    """path, refused unless it is inside the run folder and in no known mirror: a recipe's `to` or `run.cwd` that
    names the mirror (or climbs out with `..`) would let a run overwrite a recorded result."""
    import os

    from cloudvault.catalog.mirror_guard import refuse_write_into_mirror

    refuse_write_into_mirror(conn, path, f"{what} of recipe {recipe.name}")
    real, base = os.path.realpath(path), os.path.realpath(run_dir)
    if real != base and not real.startswith(base + os.sep):
        raise RecipeInvalid(path=recipe.path, detail=f"{what} {path} is outside the run folder {run_dir}")
    return str(path)


def _without_secrets(conn: sqlite3.Connection, members: list, mirror_id: int, entry_id: str) -> list:
    """The members minus those flagged as holding a secret (an env snapshot with a token is never staged)."""
    from cloudvault.catalog.flagged import secret_holders

    flagged = secret_holders(conn, mirror_id, entry_id)
    return [m for m in members if (m.file_id, m.path if m.archive else None) not in flagged]


def _processes(conn, recipe: Recipe, context: dict, settings: dict, env: dict, standin: bool) -> list[Process]:
    run = recipe.section("run")
    program = recipe.section("standin")["program"] if standin else run["program"]
    gpus = run.get("gpus", settings.get("gpus", 0) if recipe.kind == "harness" else 0)
    cores = run.get("cpu_cores_per_gpu", 0)
    per_gpu = run.get("processes_per_gpu", 1)
    processes = []
    for gpu in range(gpus) if gpus else [None]:
        for slot in range(per_gpu):
            ctx = {**context, "gpu": "" if gpu is None else str(gpu)}
            line = expand(f"{program} {run['args']}", ctx, where="run.args", recipe=recipe.path, quote=shlex.quote)
            cwd = expand(run.get("cwd", "{run}/work"), ctx, where="run.cwd", recipe=recipe.path)
            cwd = within_run(conn, Path(context["run"]), cwd, "run.cwd", recipe)
            penv = dict(env) if gpu is None else {**env, "CUDA_VISIBLE_DEVICES": str(gpu)}
            cpu = list(range(cores * gpu, cores * (gpu + 1))) if cores and gpu is not None else []
            name = "run" if gpu is None else f"gpu{gpu}" + (f".{slot}" if per_gpu > 1 else "")
            processes.append(Process(name, shlex.split(line), penv, gpu, cpu, cwd))
    return processes


@dataclass(frozen=True)
class RecordPlanned(Document):
    """The record a run is compared with: its folder in the entry and the files compared."""

    folder: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class InputPlanned(Document):
    """One input staged into the run folder: from which entry, to where, how many files and bytes, from what."""

    name: str
    entry: str
    dest: str
    files: int
    bytes: int
    sources: tuple[str, ...]  # the archives (or ENTRY/BASE folders) its members come from: "from" in the document

    def to_json(self) -> dict:
        return {"name": self.name, "entry": self.entry, "dest": self.dest, "files": self.files, "bytes": self.bytes,
                "from": list(self.sources)}  # fmt: skip


@dataclass(frozen=True)
class ProcessPlanned(Document):
    """One process of the run: its command line, GPU, folder, pinned cores ("a-b", "" unpinned) and the env it
    adds to the run's."""

    name: str
    command: str
    gpu: int | None
    cwd: str
    cpu_cores: str
    env: dict[str, str]


@dataclass(frozen=True)
class ComparePlanned(Document):
    """How the outputs are compared: each column's rule, the settings compared, the near-tie margin."""

    rules: dict[str, str]
    settings: list[str] | None
    near_tie_margin: float


@dataclass(frozen=True)
class PlanDocument(Document):
    """The plan as a document: the dry run prints it, provenance.json and a detached run's plan.json keep it. The
    recipe's own sections (environment, code, model) and the docs summary are its data, kept as they are."""

    recipe: str
    recipe_path: str
    recipe_hash: str
    kind: str
    entry: str
    record: RecordPlanned
    environment: dict
    runner: str
    code: dict
    model: dict
    run_dir: str
    env: dict[str, str]
    inputs: tuple[InputPlanned, ...]
    processes: tuple[ProcessPlanned, ...]
    docs: dict
    outputs: tuple[str, ...]
    merge: dict[str, str]
    compare: ComparePlanned


def describe(plan: Plan) -> PlanDocument:
    """The plan as a document (the dry run prints it; provenance.json keeps it)."""
    recipe = plan.recipe
    code = recipe.section("code")
    inputs = tuple(InputPlanned(i.name, i.entry_id, str(i.dest), len(i.members), sum(m.size or 0 for m in i.members),
                                tuple(sorted({m.archive or f"{i.entry_id}/{i.base}" for m in i.members})))
                   for i in plan.inputs)  # fmt: skip
    processes = tuple(ProcessPlanned(p.name, shlex.join(p.argv), p.gpu, p.cwd,
                                     f"{p.cpu_cores[0]}-{p.cpu_cores[-1]}" if p.cpu_cores else "",
                                     {k: v for k, v in p.env.items() if k not in plan.env})
                      for p in plan.processes)  # fmt: skip
    return PlanDocument(
        recipe.name, str(recipe.path), recipe.hash, recipe.kind, plan.entry_id,
        RecordPlanned(plan.record_folder, tuple(plan.record_files)), recipe.section("environment"),
        "stand-in" if plan.standin else "harness", {**code, "commit": code.get("commit", plan.settings.get("commit"))},
        recipe.section("model"), str(plan.run_dir), plan.env, inputs, processes, plan.docs or {}, tuple(plan.outputs),
        plan.merge, ComparePlanned({c: str(r) for c, r in plan.rules.items()}, plan.compare_settings, plan.near_tie),
    )  # fmt: skip
