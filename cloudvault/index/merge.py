"""`vault index slurm merge`: a Slurm index plan's shards into the catalog, then the rest of the mirror indexed
locally, leaving the catalog as a local `vault index` of the same mirror would.

Under the writer lock, every task's shard is checked against the plan (plan hash, task, archives, bytes, member
rows) before anything is written. Each archive is then committed from its shard by `commit_archive`, the code a
local index uses, one transaction each; an archive that changed since the plan is left to the local pass. The
plan is marked merged and its shards removed, so a second merge (or one that waited for this one) does nothing.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

from cloudvault.catalog import files as catalog_files
from cloudvault.catalog import generations, mirror_registry, mirrors, shards
from cloudvault.catalog.db import catalog_file, open_catalog, transaction, writer_lock
from cloudvault.catalog.query import known_mirrors
from cloudvault.index.archives import ShardOutcome, commit_archive
from cloudvault.index.context import IndexOptions, IndexReport, MirrorContext
from cloudvault.index.listing import check_listings
from cloudvault.index.plan import listing_for
from cloudvault.index.roots import MirrorRoot, roots_to_index
from cloudvault.index.run import index_mirrors
from cloudvault.index.secrets import SecretRules
from cloudvault.index.slurm import Layout, ShardRefused, ShardsMissing, load_plan, read_json, shard_states, write_json
from cloudvault.models import FileStat
from cloudvault.progress import Progress


def merge(catalog: Path, *, wait: bool = False, progress: Progress | None = None) -> tuple[IndexReport, dict]:
    """Merge the catalog's Slurm plan; returns the index report and what was merged ({'already': True} when
    this plan was merged before)."""
    lay = Layout(catalog)
    progress = progress or Progress()
    with writer_lock(catalog, wait=wait):
        plan = load_plan(lay.plan)
        if (done := read_json(lay.merged)).get("plan") == plan["hash"]:
            return IndexReport(), {"plan": plan["hash"], "already": True, "at": done.get("at")}
        _check_shards(lay, plan)
        conn = open_catalog(catalog, create=True)
        try:
            mroots = roots_to_index(conn, [r["root"] for r in plan["roots"]], plan["definition"])
            started = time.monotonic()
            early = IndexReport()
            with transaction(conn):  # the shards and the local pass are one generation
                generation = generations.begin(conn, [m.definition.name for m in mroots])
            for task in range(len(plan["tasks"])):
                _commit_shard(conn, mroots, str(lay.shard(task)), early, progress, generation)
            report = index_mirrors(conn, mroots, IndexOptions(generation=generation), progress)
            _add(report, early, time.monotonic() - started)
            with transaction(conn):
                generations.finish(conn, generation, report.mirrors, report.generation_counts())
        finally:
            conn.close()
        info = {"plan": plan["hash"], "already": False, "shards": len(plan["tasks"]),
                "from_shards": early.archives_read, "at": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
        # marked and cleared before the lock goes: a merge waiting for it then finds this plan merged
        write_json(lay.merged, info)
        shutil.rmtree(lay.folder / "shards", ignore_errors=True)
    return report, info


def _check_shards(lay: Layout, plan: dict) -> None:
    states = shard_states(lay, plan)
    missing = [t for t, why in states.items() if why == "missing"]
    if missing:
        raise ShardsMissing(tasks=", ".join(map(str, missing)), plan=plan["hash"][:12])
    for task, why in states.items():
        if why:
            raise ShardRefused(shard=lay.shard(task), why=why)


def _commit_shard(conn: sqlite3.Connection, mroots: list[MirrorRoot], shard: str, report: IndexReport,
                  progress: Progress, generation: int) -> None:  # fmt: skip
    """Each archive of one shard committed as a local index commits it, if the file is still as planned."""
    _, archives = shards.read_shard(shard)
    by_root = {m.mirror.root: m for m in mroots}
    known_roots = {name: root for root, (name, _) in known_mirrors(conn).items()}
    for root in dict.fromkeys(root for root, *_ in archives):
        mroot = by_root.get(root)
        # a mirror the catalog knows under another root is left to the local pass, which refuses or prunes it
        if mroot is None or known_roots.get(mroot.definition.name, root) != root:
            continue
        # an archive changed since its task read it is left to the local pass, which reads it again
        planned = [st for r, st, _, _ in archives if r == root]
        same = [st for st in planned if mroot.mirror.stat(st.path, st.raw_path) == (st.size, st.mtime_ns)]
        if not same:  # a root that vanished gets no row here: the local pass refuses it
            continue
        ctx = _context(conn, mroot, report, progress, generation)
        recorded = catalog_files.archive_signatures(conn, mroot.definition.name)
        for st in same:
            if recorded.get(st.path) != st.signature:  # else committed by a merge killed after it: not again
                progress.current(st.path)
                commit_archive(ctx, st, ShardOutcome(), shard)
        _check_listings(ctx, {st.path for st in same})


def _check_listings(ctx: MirrorContext, committed: set[str]) -> None:
    """Listings beside the committed archives, as a local run checks them; a listing that is new or changed is
    left to the local pass, which reads it and checks it then (checked once, counted once)."""
    walked = [item for item in ctx.mirror.walk() if isinstance(item, FileStat)]
    stats = {st.path: st for st in walked}
    known = catalog_files.archive_signatures(ctx.conn, ctx.definition.name)
    unchanged = {p for p in committed if (st := stats.get(listing_for(p))) and known.get(st.path) == st.signature}
    if unchanged:
        check_listings(ctx, walked, unchanged)


def _context(conn: sqlite3.Connection, mroot: MirrorRoot, report: IndexReport, progress: Progress,
             generation: int) -> MirrorContext:  # fmt: skip
    definition = mroot.definition
    mirror_registry.record(catalog_file(conn), [(mroot.mirror.root, definition.name)])
    with transaction(conn):
        mirror_id = mirrors.upsert_mirror(conn, definition.name, mroot.mirror.root, definition.manifest)
    rules = SecretRules(definition.secrets)
    return MirrorContext(conn, mirror_id, mroot.mirror, definition, rules, report, progress, generation=generation)


def _add(report: IndexReport, early: IndexReport, seconds: float) -> None:
    """The archives committed from shards count as read by this run, not as unchanged ones of its local pass."""
    report.files_read += early.files_read
    report.files_unchanged -= early.files_read
    report.archives_read += early.archives_read
    report.members_indexed += early.members_indexed
    report.bytes_read += early.bytes_read
    for name in ("added", "modified", "changed_in_place", "newly_damaged"):
        setattr(report, name, getattr(report, name) + getattr(early, name))
    report.count(early.flags)
    report.seconds = seconds
