"""`vault index --slurm N | --status | --resume | --merge`: the Slurm side of `vault index`."""

from __future__ import annotations

from pathlib import Path

from cloudvault import errors


def run_slurm(args) -> int:
    from cloudvault import config
    from cloudvault.cli.ui import UI

    modes = [name for name in ("slurm", "status", "resume", "merge") if getattr(args, name)]
    if len(modes) > 1:
        raise errors.UsageError(detail=f"--{modes[0]} and --{modes[1]} cannot be combined")
    if args.dry_run and not args.slurm:
        raise errors.UsageError(detail="--dry-run goes with --slurm N")
    if args.fs_gbps is not None and args.fs_gbps <= 0:
        raise errors.UsageError(detail="--fs-gbps must be a positive bandwidth in GB/s")
    ui = UI(as_json=args.json, quiet=args.quiet)
    path = Path(config.catalog_path(args.catalog, writing=True)).absolute()  # the jobs may start in another folder
    if args.merge:
        return _merge(ui, path, args.wait)
    from cloudvault.index.slurm import Layout, resume, status

    if args.status:
        doc = status(Layout(path))
        ui.emit(doc) if args.json else _show_status(ui, doc)
        return errors.OK
    if args.resume:
        doc = resume(Layout(path), args.partition)
        ui.emit(doc) if args.json else _show_submitted(ui, doc, "resumed")
        return errors.OK
    return _plan(ui, path, args)


def _plan(ui, path: Path, args) -> int:
    import contextlib
    import tempfile

    from cloudvault.catalog import files as catalog_files
    from cloudvault.cli.common import opened_catalog
    from cloudvault.index.roots import roots_to_index
    from cloudvault.index.slurm import Layout, dry_run, make_plan, plan_archives, root_docs, submit

    definition = args.definition
    if definition and definition.endswith(".toml"):  # the merge job resolves it from another folder
        definition = str(Path(definition).resolve())
    # a dry run before the first index leaves no catalog behind: it plans against an empty one
    fresh = args.dry_run and not path.exists()
    with (
        tempfile.TemporaryDirectory(prefix="vault-plan-") if fresh else contextlib.nullcontext() as folder,
        opened_catalog(path=Path(folder) / "empty.db" if folder else path, readonly=False, create=True) as conn,
    ):
        mroots = roots_to_index(conn, args.mirrors, definition)
        known = {m.definition.name: catalog_files.archive_signatures(conn, m.definition.name) for m in mroots}
        recorded = list(catalog_files.recorded_archive_sizes(conn, [m.definition.name for m in mroots]))
    to_read, every = plan_archives(mroots, known)
    plan = make_plan(path, root_docs(mroots), to_read, args.slurm, definition)
    lay = Layout(path)
    if args.dry_run:
        doc = dry_run(lay, plan, args.slurm, args.partition, args.fs_gbps, recorded, every)
        ui.emit(doc) if args.json else _show_dry_run(ui, lay, doc)
        return errors.OK
    if not plan["tasks"]:
        ui.line("nothing for Slurm: every archive is indexed as it is now; `vault index` reads the rest")
        return errors.OK
    doc = submit(lay, plan, args.partition)
    ui.emit(doc) if args.json else _show_submitted(ui, doc, "submitted")
    return errors.OK


def _merge(ui, path: Path, wait: bool) -> int:
    from cloudvault.cli.ui import human_size
    from cloudvault.index.merge import merge

    report, info = merge(path, wait=wait, progress=ui.progress("merging"))
    if ui.as_json:
        ui.emit({"catalog": str(path), **info, **report.__dict__, "damaged": report.damaged})
    elif info["already"]:
        ui.line(f"plan {info['plan'][:12]} was merged at {info['at']}: nothing to do")
    elif not ui.quiet:
        r = report
        ui.line(f"merged plan {info['plan'][:12]} into {path}: {info['from_shards']} archives from {info['shards']} "
                f"shards; {r.files_seen} files seen, {r.files_read} read ({human_size(r.bytes_read)}, archives by the "
                f"tasks), {r.files_unchanged} unchanged, {r.files_deleted} removed; {r.members_indexed} members, "
                f"{r.seconds:.2f} s")  # fmt: skip
        for kind, n in sorted(r.flags.items()):
            ui.line(f"  flagged: {n} {kind.replace('_', ' ')}")
    return errors.INTEGRITY if report.damaged else errors.OK


def _show_submitted(ui, doc: dict, verb: str) -> None:
    if doc.get("merged"):
        ui.line(f"plan {doc['plan'][:12]} is already merged: nothing to resume")
        return
    tasks = f"array job {doc['array']} (tasks {','.join(map(str, doc['tasks']))})" if doc["array"] else "no tasks"
    depend = f", afterok:{doc['array']}" if doc["array"] else ""
    ui.line(f"{verb} plan {doc['plan'][:12]}: {tasks}; merge job {doc['merge']}{depend}")
    ui.line("follow it with `vault index --status`")


def _show_dry_run(ui, lay, doc: dict) -> None:
    from cloudvault.cli.ui import human_size

    plan = doc["plan"]
    n = sum(len(t["archives"]) for t in plan["tasks"])
    total = sum(t["bytes"] for t in plan["tasks"])
    ui.line(f"plan {plan['hash'][:12]}: {len(plan['tasks'])} tasks, {n} archives, {human_size(total)} "
            "(bin-packed by compressed size, largest first)" if n else "plan: every archive is indexed as it is "
            "now; nothing to submit")  # fmt: skip
    for i, task in enumerate(plan["tasks"]):
        ui.line(f"  task {i}  {len(task['archives'])} archives  {human_size(task['bytes'])}")
        for a in task["archives"]:
            ui.line(f"      {a['path']}  {human_size(a['size'])}")
    scripts = (("array job", "array_script", "job.sbatch"), ("merge job", "merge_script", "merge.sbatch"))
    for title, key, name in scripts if plan["tasks"] else ():
        ui.line(f"{title} ({lay.folder / name}):")
        for line in doc[key].splitlines():
            ui.line(f"  {line}")
    m = doc["measured"]
    ui.line(f"measured: {m['archives']} archive(s), {human_size(m['bytes'])} scanned by one task's code at "
            f"{human_size(m['bytes_per_s'])}/s")  # fmt: skip
    fs = f"filesystem {doc['fs_gbps']} GB/s" if doc["fs_gbps"] else "no filesystem limit given (--fs-gbps)"
    what = "the plan" if doc["simulated"] == "plan" else "a full re-index of the catalog's recorded archives"
    ui.line(f"simulated wall time for {what} ({fs}; merge not included):")
    ui.line(f"  {'tasks':>5}  {'wall':>9}  {'speed-up':>8}  limited by")
    for row in doc["simulation"]:
        ui.line(f"  {row['tasks']:>5}  {row['seconds']:>8.1f}s  {row['speedup']:>7.2f}x  {row['limited_by']}")


def _show_status(ui, doc: dict) -> None:
    from cloudvault.cli.ui import human_size

    ui.line(f"plan {doc['plan'][:12]} for {doc['catalog']}: array job {doc['array'] or '-'}, merge job "
            f"{doc['merge'] or '-'}: {doc['merge_state']}")  # fmt: skip
    ui.line(f"  {'task':>4}  {'archives':>8}  {'bytes':>21}  {'MB/s':>7}  state")
    for t in doc["tasks"]:
        finished = t["state"] in ("done", "merged")
        done = t["archives"] if finished else t["archives_done"]
        got = t["bytes"] if finished else t["bytes_done"]
        rate = f"{t['mb_s']:.1f}" if t["mb_s"] is not None else "-"
        size = f"{human_size(got)}/{human_size(t['bytes'])}"
        ui.line(f"  {t['task']:>4}  {done:>3}/{t['archives']:<4}  {size:>21}  {rate:>7}  {t['state']}")
