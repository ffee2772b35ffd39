"""One reproduction, start to end: plan, preflight, a new run folder, stage inputs from the mirror, run through an
executor, collect, compare with the record, write compare.csv + REPORT.md + provenance.json, record in the catalog.

The run folder is always new (never a recorded result, never inside the mirror); inputs are verified copies of the
mirror's files, so a script that writes next to its inputs cannot touch the mirror.
"""

from __future__ import annotations

import json
import platform
import socket
import sqlite3
from collections import namedtuple
from datetime import UTC, datetime
from pathlib import Path

from cloudvault.atomic import atomic_write, write_text
from cloudvault.errors import (
    EnvironmentProblem,
    IntegrityError,
    Interrupted,
    UsageError,
    VaultError,
    as_interrupted,
)
from cloudvault.progress import Progress
from cloudvault.repro import plan as planning
from cloudvault.repro import report, results
from cloudvault.repro.compare import RunComparison, compare_files
from cloudvault.repro.judge import CompareConfig, judge, write_report
from cloudvault.repro.outcomes import RunBatch, RunJudged, RunQueued
from cloudvault.repro.preflight import PreflightFailed, run_checks
from cloudvault.repro.recipe import Recipe

RUN_ABOUT = "run.json"  # what a runner ran on, when it says (cloudvault.repro.gpu_smoke writes it)
PLAN = "plan.json"  # the plan a run was started with and the recipe's own bytes: a detached run is judged by it
# what the CLI shows as a run goes: lines, a staging bar, and each run of a batch judged (index, RunJudged)
Feedback = namedtuple("Feedback", "line progress judged", defaults=(None,))
Collected = namedtuple("Collected", "status edited")  # a detached run's status now; the recipe edit since, named


class StoredPlanMismatch(IntegrityError):
    """run {run_id}: {path} does not match the recipe hash recorded for it ({found}, recorded {recorded}); it is not
    collected"""


class RunFailed(EnvironmentProblem):
    """{recipe}: {failed} of {total} processes failed (exit codes {codes}); logs in {logs}"""


def new_run_dir(conn: sqlite3.Connection, base: Path, recipe: Recipe) -> tuple[str, Path]:
    """A run id unused in the catalog and a new folder for it under base, which must not be inside any mirror."""
    from cloudvault.catalog.mirror_guard import refuse_write_into_mirror
    from cloudvault.catalog.records import runs

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    refuse_write_into_mirror(conn, base, "runs under --out")
    if base.exists() and not base.is_dir():
        raise UsageError(detail=f"{base} is not a folder; --out names the folder that run folders go under")
    for n in range(100):
        run_id = f"{recipe.name}-{stamp}" + (f"-{n}" if n else "")
        if not (base / run_id).exists() and not runs(conn, run_id=run_id):
            return run_id, base / run_id
    raise UsageError(detail=f"too many runs of {recipe.name} this second")


def reproduce(conn: sqlite3.Connection, recipe: Recipe, executor, options: planning.RunOptions,
              feedback: Feedback | None = None, detach: bool = False,
              more_noise: tuple[dict, ...] = ()) -> RunJudged | RunQueued:  # fmt: skip
    """Run the recipe and compare with the record. Preflight failures raise PreflightFailed (exit 6).
    detach: return once the job is submitted and recorded as queued (RunQueued); `vault runs collect` collects.
    more_noise: rows of earlier runs of this --repeat batch, measuring the timing noise beside the record's own
    repetitions."""
    from cloudvault.catalog.records import finish_run, start_run
    from cloudvault.repro.executors import with_executor_checks

    say, progress, _ = feedback or Feedback(lambda text: None, Progress())
    run_id, run_dir = new_run_dir(conn, options.base, recipe)
    plan = planning.build(conn, recipe, run_dir, options)
    checks = with_executor_checks(run_checks(conn, plan, options.out_explicit), executor, plan)
    failed = [c for c in checks if not c.ok]
    if failed and not options.force_preflight:
        raise PreflightFailed(check=failed[0].name, detail=failed[0].detail)
    run_dir.mkdir(parents=True)
    prov = _provenance(conn, plan, run_id, checks, forced=[c.name for c in failed])
    # what `vault runs` needs to rebuild the plan of a detached run
    prov["options"] = {"standin": options.standin, "env": options.env_overrides or {},
                       **executor.options}  # fmt: skip
    job = None
    try:  # from here on, however the run ends (an interrupt at any line included) it is recorded as ended
        _write_json(run_dir / results.PROVENANCE, prov)
        _write_json(run_dir / PLAN, stored_plan(plan, prov["options"]))
        start_run(conn, run_id=run_id, recipe=recipe.name, recipe_hash=recipe.hash, mirror_id=plan.mirror_id,
                  entry_id=plan.entry_id, executor=executor.name, folder=str(run_dir))  # fmt: skip
        say(f"staging {sum(len(i.members) for i in plan.inputs)} input files from the mirror")
        stage_inputs(conn, plan, progress)
        job = executor.submit(plan)
        if job.job_id:  # at once: `vault runs` shows the queued job, and a detached run can be collected
            prov["job_id"] = job.job_id
            finish_run(conn, run_id, status="queued" if executor.queues else "running", job_id=job.job_id)
        if detach:
            prov["status"] = "queued"
            _write_json(run_dir / results.PROVENANCE, prov)
            return RunQueued(run_id, prov.get("job_id"), entry=recipe.entry)
        say(f"running {len(plan.processes)} process(es) with the {executor.name} executor in {run_dir}")
        codes = executor.wait(job, lambda name, code, s: say(f"{name} ended with exit {code} after {s:.1f} s"))
        cmp, totals = _collect_and_compare(conn, plan, executor, job, codes, prov, more_noise)
        _write_report(plan, cmp, totals, conn)
        _close(conn, prov, run_dir, "finished", cmp)
    except (KeyboardInterrupt, Interrupted) as exc:  # Ctrl-C, SIGTERM, SIGHUP
        if not _recorded_ended(conn, run_id):  # else it came once the run was recorded (held until then)
            if job is not None:
                prov["exit_codes"] = {p.name: c for p, c in zip(plan.processes, job.codes, strict=True)}
            _close(conn, prov, run_dir, "interrupted")
        raise as_interrupted(exc) from None
    except Exception as exc:  # a VaultError, or a bug: either way the run must not stay "running"
        prov["error"] = exc.message if isinstance(exc, VaultError) else repr(exc)
        _close(conn, prov, run_dir, "failed")
        raise
    return RunJudged(run_id, str(run_dir), plan.record_folder, cmp)


def reproduce_batch(conn: sqlite3.Connection, recipe: Recipe, executors, options: planning.RunOptions,
                    feedback: Feedback | None = None, *, repeat: int = 1,
                    detach: bool = False) -> RunBatch | RunQueued:  # fmt: skip
    """`vault repro` (--repeat N): N runs, each judged against the record as it ends (feedback.judged), the timing
    noise growing with the batch's earlier runs; executors(i) is the i-th run's executor. A detached run is one
    run: RunQueued."""
    earlier: list[dict] = []
    judged = []
    for i in range(repeat):
        done = reproduce(conn, recipe, executors(i), options, feedback, detach=detach, more_noise=tuple(earlier))
        if isinstance(done, RunQueued):
            return done
        if feedback and feedback.judged:
            feedback.judged(i, done)
        judged.append(done)
        if recipe.kind == "harness":
            earlier.append(run_rows(done.folder))
    return RunBatch(tuple(judged))


def _collect_and_compare(conn: sqlite3.Connection, plan, executor, job, codes: list[int], prov: dict,
                         more_noise: tuple[dict, ...] = ()):  # fmt: skip
    executor.collect(job)
    prov["exit_codes"] = {p.name: c for p, c in zip(plan.processes, codes, strict=True)}
    if any(codes):
        bad = [c for c in codes if c]
        raise executor.failure(job, codes) or RunFailed(recipe=plan.recipe.name, failed=len(bad), total=len(codes),
                                                        codes=sorted(set(bad)), logs=plan.run_dir / "logs")  # fmt: skip
    merge_outputs(plan)
    return compare_with_record(conn, plan, more_noise)


def collect_detached(conn: sqlite3.Connection, run, executor) -> Collected:
    """A detached run (catalog row) whose job has ended: collected, compared and recorded as a waited run would
    be, by the plan it was queued with (plan.json); its status now ("queued" while the job is still pending or
    running) and, when the recipe was edited since it was queued, a line saying so."""
    run_dir = Path(run.folder)
    prov = results.provenance(run_dir)
    if not prov.get("plan"):
        raise UsageError(detail=f"run {run.run_id}: {run_dir} has no provenance.json to collect it by")
    recipe, edited = queued_recipe(run, prov)
    options = prov.get("options", {})
    plan = planning.build(conn, recipe, run_dir, planning.RunOptions(run_dir.parent, True, options.get("standin"),
                                                                     options.get("env")))  # fmt: skip
    job = executor.resume(plan, run.job_id)
    if executor.poll(job) is None:
        from cloudvault.catalog.records import finish_run

        status = "running" if executor.started(job) else "queued"
        if status != run.status:
            finish_run(conn, run.run_id, status=status)
        return Collected(status, edited)
    try:
        cmp, totals = _collect_and_compare(conn, plan, executor, job, executor.wait(job), prov)
    except VaultError as exc:
        prov["error"] = exc.message
        _close(conn, prov, run_dir, "failed")
        return Collected("failed", edited)
    _write_report(plan, cmp, totals, conn)
    _close(conn, prov, run_dir, "finished", cmp)
    return Collected("finished", edited)


def stored_plan(plan, options: dict) -> dict:
    """What plan.json keeps: the recipe's own bytes (its hash is the catalog's recipe_hash), the options, the plan."""
    recipe = plan.recipe
    return {"recipe": {"name": recipe.name, "path": str(recipe.path), "hash": recipe.hash,
                       "source": recipe.source.decode("utf-8")},
            "options": options, "plan": planning.describe(plan).to_json()}  # fmt: skip


def queued_recipe(run, prov: dict) -> tuple[Recipe, str | None]:
    """The recipe a run was queued with, from its plan.json (checked against the hash the catalog recorded), and a
    line naming an edit of the recipe's file since (None when there is none). A run folder of an older vault has
    no plan.json: it is judged by the recipe as it is now, and an edit since is named all the same."""
    from cloudvault.repro.recipe import from_source, load

    kept_at = Path(run.folder) / PLAN
    name = prov["plan"]["recipe"]
    try:
        now = load(prov["plan"]["recipe_path"])
    except VaultError as exc:
        if not kept_at.is_file():
            raise
        now, gone = None, exc.message
    if kept_at.is_file():
        kept = json.loads(kept_at.read_text(encoding="utf-8"))["recipe"]
        recipe = from_source(kept["name"], Path(kept["path"]), kept["source"].encode("utf-8"))
        if recipe.hash != run.recipe_hash:
            raise StoredPlanMismatch(run_id=run.run_id, path=kept_at, found=recipe.hash, recorded=run.recipe_hash)
        judged = "it is judged by the recipe it was queued with (its plan.json)"
    else:
        recipe, judged = now, "its folder keeps no plan.json (an older vault queued it): it is judged by the recipe now"
    if now is not None and now.hash == run.recipe_hash:
        return recipe, None
    change = f"now {now.hash}" if now is not None else f"now it does not load: {gone}"
    edited = f"recipe {name} was edited after run {run.run_id} was queued (hash {run.recipe_hash}, {change})"
    return recipe, f"{edited}; {judged}"


def _provenance(conn: sqlite3.Connection, plan, run_id: str, checks: list, forced: list[str]) -> dict:
    return {
        "run_id": run_id, "recipe": plan.recipe.name, "recipe_hash": plan.recipe.hash, "entry": plan.entry_id,
        "settings": plan.run_settings, "plan": planning.describe(plan).to_json(), "host": socket.gethostname(),
        "environment": _environment_identity(conn, plan),
        "platform": platform.platform(), "python": platform.python_version(), "gpus": _gpu_names(plan),
        "preflight": [c._asdict() for c in checks], "forced_preflight": forced,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"), "status": "running",
    }  # fmt: skip


def _environment_identity(conn: sqlite3.Connection, plan) -> dict:
    """What the processes ran in: the stand-in (vault's version), or the restored env / image as recorded."""
    from cloudvault import __version__
    from cloudvault.catalog.records import restores

    if plan.standin:
        return {"kind": "stand-in", "runner": "cloudvault.repro.standin", "vault": __version__}
    env = plan.recipe.section("environment")
    if not env:
        return {"kind": "none"}
    kind, name = ("docker", env["docker"]) if "docker" in env else ("env", env.get("env_name"))
    done = [r for r in restores(conn, kind=kind) if r.status == "ok" and r.name == name]
    last = done[-1] if done else None
    return {"kind": kind, "name": name, "target": last and last.target, "source": last and last.source,
            "source_hash": last and last.source_hash, "restored_at": last and last.finished_at}  # fmt: skip


def _gpu_names(plan) -> list[str]:
    if plan.standin or not any(p.gpu is not None for p in plan.processes):
        return []
    try:
        from cloudvault.tools.gpu import local_gpus
    except ImportError:
        return []
    return [f"{g.index}: {g.name} ({g.cap_text})" for g in local_gpus() or []]


def _close(conn, prov: dict, run_dir: Path, status: str, cmp: RunComparison | None = None) -> None:
    """The run's end, in provenance.json and in the catalog (with its verdict and per-request results). Ctrl-C,
    SIGTERM and SIGHUP are held until both are written, then delivered: a second Ctrl-C (or one landing as the run
    ends) never leaves the run `running`."""
    from cloudvault.jobthreads import held_signals
    from cloudvault.mount.staging import release

    with held_signals():
        try:
            release(run_dir)  # an input mount, if the recipe asked for one
        finally:
            _record_end(conn, prov, run_dir, status, cmp)


def _recorded_ended(conn, run_id: str) -> bool:
    """Whether the catalog holds the run's end (finished, failed, interrupted), not only its start or nothing."""
    from cloudvault.catalog.records import runs

    return any(r.status not in ("queued", "running") for r in runs(conn, run_id=run_id))


def _record_end(conn, prov: dict, run_dir: Path, status: str, cmp: RunComparison | None) -> None:
    """provenance.json, then the catalog's row (if the run got one), say how the run ended."""
    from cloudvault.catalog.records import finish_run, runs

    verdict = cmp.verdict if cmp else None
    prov.update(status=status, verdict=verdict, finished_at=datetime.now(UTC).isoformat(timespec="seconds"))
    _write_json(run_dir / results.PROVENANCE, prov)
    if not runs(conn, run_id=prov["run_id"]):
        return  # interrupted before its row was written: its folder says how it ended
    if cmp is None:
        finish_run(conn, prov["run_id"], status=status, summary={"error": prov.get("error", status)})
        return
    from cloudvault.repro.timings import as_document

    summary = {"headline": report.headline(cmp), "reasons": cmp.reasons, "counts": cmp.counts,
               "timings": as_document(cmp.timings), "forced_preflight": prov["forced_preflight"]}  # fmt: skip
    finish_run(conn, prov["run_id"], status=status, verdict=verdict, summary=summary,
               requests=report.requests_for_catalog(cmp))  # fmt: skip


def _write_json(path: Path, doc: dict) -> None:
    write_text(path, json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")


def stage_inputs(conn: sqlite3.Connection, plan, progress: Progress) -> None:
    """Verified copies of every input member under the run folder (one forward pass per archive)."""
    from cloudvault.io.landing import Landing, write_chunks
    from cloudvault.io.members import MemberReader, read_order
    from cloudvault.mount import staging

    where, linked = {}, {}  # every landing is checked before the first byte is written
    for staged in plan.inputs:
        folder = Landing(staged.dest.parent if staged.single else staged.dest, name="the run folder")
        landing = linked if staging.via(plan.recipe, staged.name) == "mount" else where
        for m in staged.members:
            rel = staged.dest.name if staged.single else m.path[len(staged.base) :].lstrip("/")
            landing[m] = Path(folder.path_for(m, rel))
    if linked:
        staging.link_inputs(conn, plan.run_dir, linked)
    progress.start(sum(m.size or 0 for m in where), len(where))
    with MemberReader(conn, on_data=progress.advance) as reader:
        for member in read_order(where):
            progress.current(member.path)
            write_chunks(reader.open(member), where[member])
    progress.finish()


def merge_outputs(plan) -> None:
    """Per-process output files (per_request.gpu*.csv) into the one file the record has (one header kept)."""
    work = plan.run_dir / "work"
    for final, pattern in plan.merge.items():
        parts = sorted(work.glob(pattern), key=lambda p: [int(t) if t.isdigit() else t for t in p.name.split(".")])
        with atomic_write(work / final, mode=0o644) as fh:
            for i, part in enumerate(parts):
                lines = part.read_bytes().splitlines(keepends=True)
                fh.write(b"".join(lines[1:] if i and final.endswith(".csv") else lines))


def run_rows(run_dir: Path) -> dict:
    """A finished run folder's per-request rows (what a later run of a --repeat batch takes as noise)."""
    work = Path(run_dir) / "work"
    return results.parse(results.read_folder(work), str(work))


def compare_with_record(conn: sqlite3.Connection, plan, more_noise: tuple[dict, ...] = ()
                        ) -> tuple[RunComparison, tuple[dict, dict] | None]:  # fmt: skip
    """The comparison with the recorded folder, and (recorded, new) totals for a harness run. The timing noise is
    measured over the record, the recipe's recorded repetitions (record.repetitions) and more_noise."""
    work = plan.run_dir / "work"
    if plan.recipe.kind == "files":
        recorded = results.read_mirror(conn, plan.mirror_id, plan.entry_id, plan.record_folder, plan.record_files)
        produced = {f: (work / f).read_bytes() for f in plan.record_files if (work / f).is_file()}
        return compare_files(recorded, produced), None
    from cloudvault.repro.sources import from_entry

    record = from_entry(conn, plan.entry_id, folder=plan.record_folder)
    new = results.Results(str(work), results.parse(results.read_folder(work), str(work)), plan.run_settings, str(work))
    # a runner that says what it ran on (run.json: GPU, library versions) adds that to each side's settings
    recorded_about = results.read_mirror(conn, plan.mirror_id, plan.entry_id, plan.record_folder, (RUN_ABOUT,))
    record_settings = {**record.settings, **_about(recorded_about.get(RUN_ABOUT))}
    produced_about = (work / RUN_ABOUT).read_bytes() if (work / RUN_ABOUT).is_file() else None
    new_settings = {**plan.run_settings, **_about(produced_about)}
    repetitions = tuple(from_entry(conn, plan.entry_id, folder=f).rows for f in plan.recipe.repetitions())
    config = CompareConfig(plan.rules, plan.compare_settings, plan.near_tie, plan.recipe.noise_floors())
    judged = judge(record, new, config, more_noise=(*repetitions, *more_noise),
                   settings=(record_settings, new_settings))  # fmt: skip
    return judged.comparison, judged.totals


def _about(data: bytes | None) -> dict:
    return json.loads(data).get("settings", {}) if data else {}


def _write_report(plan, cmp: RunComparison, totals: tuple[dict, dict] | None, conn=None) -> None:
    """The run folder's compare.csv, timings.png and REPORT.md, as `vault compare --out` writes them."""
    rows = None
    if cmp.timings and conn is not None and plan.recipe.kind == "harness":
        from cloudvault.repro.sources import from_entry

        record = from_entry(conn, plan.entry_id, folder=plan.record_folder).rows
        rows = (("record", record), ("this run", run_rows(plan.run_dir)))
    write_report(plan.run_dir, cmp, title=f"vault repro {plan.recipe.name}",
                 labels=(f"{plan.entry_id}/{plan.record_folder}", str(plan.run_dir / "work")), totals=totals,
                 baselines=tuple(f"{plan.entry_id}/{f}" for f in plan.recipe.repetitions()), plotted=rows)  # fmt: skip
