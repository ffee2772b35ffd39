"""Walk mirrors: every file and every member of every .tar.zst, into the catalog. Re-runs are incremental.

MIRROR is a local path or an fsspec URL (ssh://host/path, s3://bucket/path). With none, the catalog's known
mirrors are re-indexed. Exit 0 when nothing was flagged as damaged, 5 when an archive or file was (truncated,
corrupt, unreadable, changed while read, unsafe member paths, listing mismatch), 6 when a known mirror root
vanished, is empty or lost over half its files (unmounted?) and --prune was not given; with --prune a root
that is gone is dropped from the catalog (as `vault mirrors rm` does). Indexing a folder with no files warns.
Secrets found are flagged, never stored. With --quiet, no summary either.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, opened_catalog

MAX_WORKERS = 256


def positive_int(text: str) -> int:
    """Worker processes: 1 up to MAX_WORKERS (each holds an archive's decoding buffers)."""
    value = int(text)
    if not 1 <= value <= MAX_WORKERS:
        raise ValueError(text)
    return value


positive_int.__name__ = f"worker count (1 to {MAX_WORKERS})"


def add_arguments(parser) -> None:
    parser.add_argument("mirrors", nargs="*", metavar="MIRROR", help="mirror roots; none: the known ones")
    parser.add_argument("--mirror", dest="definition", help="a mirror definition TOML or a built-in name")
    parser.add_argument(
        "--workers", type=positive_int, help="cores to index on (default: the cores present, as memory allows)"
    )
    parser.add_argument("--wait", action="store_true", help="wait for another indexer on this catalog to finish")
    parser.add_argument("--optimize", action="store_true", help="also write seekable copies, in the same pass")
    parser.add_argument(
        "--prune", action="store_true", help="a root that vanished, emptied or lost over half its files: drop them"
    )
    parser.add_argument("--accept", nargs="+", default=[], metavar="PATH",
                        help="files changed in place (same size and mtime, other bytes): take their new bytes as a "
                        "new version instead of keeping the recorded hash")  # fmt: skip
    slurm = parser.add_argument_group("across a Slurm cluster (see README: vault index --slurm)")
    slurm.add_argument("--slurm", type=positive_int, metavar="N", help="submit an N-task job array and a merge job")
    slurm.add_argument("--partition", help="Slurm partition for the jobs (default: the cluster's)")
    slurm.add_argument("--dry-run", action="store_true",
                       help="print the cores and memory a local run would use; with --slurm: the plan, scripts, "
                       "simulated time")  # fmt: skip
    slurm.add_argument("--fs-gbps", type=float, help="with --dry-run: the filesystem's read bandwidth, GB/s")
    slurm.add_argument("--status", action="store_true", help="per task: archives and bytes done, MB/s, state")
    slurm.add_argument("--resume", action="store_true", help="resubmit the tasks whose shards are missing or bad")
    slurm.add_argument("--merge", action="store_true", help="merge the finished plan's shards into the catalog")
    add_output_options(parser, quiet=True)


def run(args) -> int:
    import shlex
    from pathlib import Path

    from cloudvault import config
    from cloudvault.catalog.db import refuse_non_catalog, writer_lock
    from cloudvault.catalog.mirror_guard import refuse_catalog_inside_mirror
    from cloudvault.cli.ui import UI
    from cloudvault.index.roots import roots_to_index
    from cloudvault.index.run import IndexOptions, index_mirrors

    if any(not m.strip() for m in args.mirrors):
        raise errors.UsageError(detail="an empty mirror path was given")
    local = [m for m in args.mirrors if "://" not in m]
    refuse_catalog_inside_mirror(config.catalog_path(args.catalog, writing=True), local)
    if args.dry_run and not (args.slurm or args.status or args.resume or args.merge):
        return _dry_run(args)
    if args.slurm or args.status or args.resume or args.merge:
        from cloudvault.cli.index_slurm import run_slurm

        return run_slurm(args)
    ui = UI(as_json=args.json, quiet=args.quiet)
    where, origin = config.catalog_origin(args.catalog, writing=True)
    path = Path(where)
    refuse_non_catalog(path, config.NAMED_BY[origin])  # before the lock: a wrong --catalog gets nothing beside it
    with writer_lock(path, wait=args.wait):
        existed, indexing = path.exists(), False
        try:
            with opened_catalog(path=path, readonly=False, create=True, origin=origin) as conn:
                cache = config.cache_dir(path) if args.optimize else None
                roots = roots_to_index(conn, args.mirrors, args.definition)
                options = IndexOptions(workers=args.workers, copy_cache=cache, prune=args.prune,
                                       accept=tuple(args.accept))  # fmt: skip
                indexing = True
                report = index_mirrors(conn, roots, options, progress=ui.progress())
        except BaseException:
            if not (existed or indexing):  # a run that failed before indexing anything leaves no (empty) catalog
                _remove_new_catalog(path)
            raise
    for name in report.empty:  # an empty or temporary folder indexed by mistake: say how to undo it
        ui.warn(f"warning: mirror {name}: its root holds no files, so it was indexed with nothing in it; "
                f"if that was a mistake: vault mirrors rm {shlex.quote(name)}")  # fmt: skip
    if args.json:
        ui.emit({"catalog": str(path), **report.__dict__, "damaged": report.damaged})
    elif not args.quiet:
        _summary(ui, path, report)
    return errors.INTEGRITY if report.damaged else errors.OK


def _remove_new_catalog(path) -> None:
    import contextlib

    for name in (path.name, path.name + "-wal", path.name + "-shm", path.name + ".lock"):
        with contextlib.suppress(FileNotFoundError):
            path.with_name(name).unlink()


def _dry_run(args) -> int:
    """The local run's budget: its cores, and the memory each worker may hold, with one archive per core and
    with one archive decoded on all of them."""
    from cloudvault.cli.ui import UI, human_size
    from cloudvault.index.budget import plan_budget

    ui = UI(as_json=args.json, quiet=args.quiet)
    budget = plan_budget(args.workers)
    doc = budget.as_dict(budget.cores)
    if args.json:
        ui.emit(doc)
        return errors.OK
    memory = human_size(budget.memory) if budget.memory is not None else "unknown"
    bound = ", bounded by memory" if budget.bounded_by_memory else ""
    ui.line(f"cores: {budget.cores} of {budget.cores_present} present{bound}; memory available {memory}")
    many, each = budget.processes(budget.cores), budget.worker_memory(budget.cores)
    ui.line(f"  {budget.cores} or more archives: {many} worker processes, each {budget.decoders(budget.cores)} "
            f"decoding thread(s) and at most {human_size(each)} ({human_size(many * each)} in all)")  # fmt: skip
    ui.line(f"  one archive left: {budget.decoders(1)} decoding threads, at most {human_size(budget.worker_memory(1))}")
    return errors.OK


def _summary(ui, catalog, r) -> None:
    from cloudvault.cli.ui import human_size

    rate = r.bytes_read / r.seconds if r.seconds else 0
    ui.line(
        f"indexed {', '.join(r.mirrors)} into {catalog}: {r.files_seen} files seen, {r.files_read} read "
        f"({human_size(r.bytes_read)}, {human_size(int(rate))}/s), {r.files_unchanged} unchanged, "
        f"{r.files_deleted} removed; {r.archives_read} archives, {r.members_indexed} members, {r.seconds:.2f} s"
    )
    ui.line(f"  generation {r.generation}: {r.added} added, {r.modified} modified, {r.files_deleted} removed, "
            f"{r.changed_in_place} changed in place, {r.newly_damaged} newly damaged")  # fmt: skip
    for name in r.dropped:
        ui.line(f"  dropped {name}: its root is gone (--prune)")
    if r.not_opened:
        counts = ", ".join(f"{label} x{n}" for label, n in sorted(r.not_opened.items()))
        ui.line(f"  {sum(r.not_opened.values())} archives in formats vault does not open: {counts}")
    if r.encrypted_members:
        zips, members = len(r.encrypted_members), sum(r.encrypted_members.values())
        ui.line(f"  {zips} zip{'s' * (zips > 1)} with {members} encrypted member{'s' * (members > 1)} vault cannot "
                f"read: {', '.join(sorted(r.encrypted_members))}")  # fmt: skip
    if r.unread_methods:
        counts = ", ".join(f"{method} x{n}" for method, n in sorted(r.unread_methods.items()))
        members = sum(r.unread_methods.values())
        ui.line(f"  {members} zip member{'s' * (members > 1)} in methods vault does not read: {counts}")
    if r.one_block_xz:
        names = ", ".join(sorted(r.one_block_xz))
        ui.line(f"  {len(r.one_block_xz)} .tar.xz in one xz block, each member decoded from the archive's start "
                f"(`xz -T0` or `xz --block-size=16MiB` makes one seekable): {names}")  # fmt: skip
    for line in r.missing_extras:
        ui.line(f"  {line}")
    for kind, n in sorted(r.flags.items()):
        ui.line(f"  flagged: {n} {kind.replace('_', ' ')}")
    if r.still_flagged:
        ui.line(f"  {r.still_flagged} still flagged changed in place or damaged by an earlier run")
    if r.changed_in_place or r.newly_damaged or r.still_flagged:
        ui.line(f"  {r.changed_in_place} changed in place (same size and mtime, other bytes: suspected corruption), "
                f"{r.newly_damaged} newly damaged: their recorded hashes and members are kept. `vault verify` shows "
                "them; `vault index --accept PATH...` takes a file's new bytes as a new version")  # fmt: skip
