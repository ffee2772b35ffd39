"""`vault index`: walk mirrors, plan what changed, read it, and commit each archive in one transaction."""

from __future__ import annotations

import os
import sqlite3
import time

from cloudvault.archive.decoded import missing_library
from cloudvault.archive.formats import NOT_OPENED, OPENED
from cloudvault.catalog import entries, generations, mirror_registry, mirrors
from cloudvault.catalog import files as catalog_files
from cloudvault.catalog.copies import copies_of_files
from cloudvault.catalog.db import catalog_file, for_bulk_writes, transaction
from cloudvault.catalog.files import known_files
from cloudvault.catalog.mirrors import mirror_named
from cloudvault.errors import UsageError
from cloudvault.index.archives import read_archives
from cloudvault.index.context import IndexOptions, IndexReport, MirrorContext
from cloudvault.index.definition import load_manifest
from cloudvault.index.files import read_files
from cloudvault.index.listing import check_listings
from cloudvault.index.plan import Plan, plan_index
from cloudvault.index.roots import MirrorRoot, MirrorRootGone, MirrorShrank
from cloudvault.index.secrets import SecretRules
from cloudvault.index.versions import count_still_flagged
from cloudvault.index.walk import archive_formats, entry_of
from cloudvault.models import Entry, FileStat, Flag
from cloudvault.progress import Progress
from cloudvault.tools.mirrorfs import WalkProblem

__all__ = ["IndexOptions", "IndexReport", "index_mirrors"]


def index_mirrors(
    conn: sqlite3.Connection,
    roots: list[MirrorRoot],
    options: IndexOptions | None = None,
    progress: Progress | None = None,
) -> IndexReport:
    """Index each root; with options.copy_cache, also write seekable copies of single-frame archives in the same
    pass. A root that vanished, is empty or lost more than half its files is refused unless options.prune."""
    options = options or IndexOptions()
    for_bulk_writes(conn)
    report = IndexReport()
    started = time.monotonic()
    progress = progress or Progress()
    accepted = accepted_paths(roots, options.accept)
    generation = options.generation
    if generation is None:
        with transaction(conn):
            generation = generations.begin(conn, [mroot.definition.name for mroot in roots])
    for mroot in roots:
        rules = SecretRules(mroot.definition.secrets)
        mirror_id = mirror_named(conn, mroot.definition.name)  # None: a new mirror, nothing known of it yet
        ctx = MirrorContext(conn, mirror_id, mroot.mirror, mroot.definition, rules, report, progress,
                            options.copy_cache, generation, accepted[mroot.definition.name])  # fmt: skip
        if _index_one(ctx, options.workers, options.prune):
            report.mirrors.append(mroot.definition.name)
    report.seconds = time.monotonic() - started
    report.generation = generation
    with transaction(conn):
        generations.finish(conn, generation, report.mirrors, report.generation_counts())
    return report


def accepted_paths(roots: list[MirrorRoot], paths: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """mirror name -> the paths in it whose new bytes `--accept` takes: a path inside a root (absolute, or
    relative to the working folder) or relative to a root. UsageError for one that is in none of the roots."""
    found: dict[str, set[str]] = {mroot.definition.name: set() for mroot in roots}
    for path in paths:
        full = os.path.abspath(path)
        hits = [(m.definition.name, os.path.relpath(full, m.mirror.root)) for m in roots if not m.mirror.remote
                and (full + "/").startswith(os.path.abspath(m.mirror.root).rstrip("/") + "/")]  # fmt: skip
        hits = hits or [(m.definition.name, path.strip("/")) for m in roots if m.mirror.stat(path.strip("/"), None)]
        if not hits:
            raise UsageError(detail=f"--accept {path}: not a file of the mirrors indexed ({', '.join(found)})")
        for name, rel in hits:
            if rel != ".":  # a root named among the paths (`--accept PATH... ROOT`): it is indexed, not a file
                found[name].add(rel)
    return {name: frozenset(rels) for name, rels in found.items()}


def _index_one(ctx: MirrorContext, workers: int | None, prune: bool) -> bool:
    """Walk, check the root still holds what the catalog knows (nothing is written before that), then read.
    False: the root is gone and --prune dropped the mirror."""
    known = known_files(ctx.conn, ctx.mirror_id) if ctx.mirror_id is not None else {}
    for path in ctx.accepted & known.keys():  # read again, whatever its stat: its new bytes are taken
        known[path] = (-1, -1, -1, -1)
    if not ctx.mirror.exists():
        if not prune:
            raise MirrorRootGone.naming(ctx.mirror.root, ctx.definition.name, len(known))
        if ctx.mirror_id is not None:
            lost = mirrors.remove_mirror(ctx.conn, mirrors.MirrorRow(ctx.mirror_id, ctx.definition.name,
                                                                     ctx.mirror.root, None))  # fmt: skip
            ctx.report.files_deleted += lost.files
            ctx.report.dropped.append(ctx.definition.name)
        return False
    walked, problems = _walk(ctx)
    if not walked and not problems:
        ctx.report.empty.append(ctx.definition.name)
    plan = plan_index(walked, known)
    if known and not prune and len(plan.deleted) * 2 > len(known):
        raise MirrorShrank(root=ctx.mirror.root, now=len(known) - len(plan.deleted), before=len(known))
    definition = ctx.definition  # guarded from here on, whichever catalog is active: recorded before its row
    mirror_registry.record(catalog_file(ctx.conn), [(ctx.mirror.root, definition.name)])
    with transaction(ctx.conn):  # the mirror's row changes only once the root has passed that check
        ctx.mirror_id = mirrors.upsert_mirror(ctx.conn, definition.name, ctx.mirror.root, definition.manifest)
    ctx.report.files_seen += len(walked)
    ctx.report.files_unchanged += len(plan.unchanged)
    _delete(ctx, plan)
    with transaction(ctx.conn):
        entries.upsert_entries(ctx.conn, ctx.mirror_id, _entries(ctx, walked))
        catalog_files.clear_flags(ctx.conn, ctx.mirror_id, "walk_error")
        for problem in problems:
            flag = Flag("walk_error", ctx.rules.redact(f"{problem.path}: {problem.detail}"))
            catalog_files.insert_flags(ctx.conn, ctx.mirror_id, ctx.entry_for(problem.path), None, [flag])
            ctx.report.count([flag])
    to_read = plan.to_read
    ctx.progress.start(sum(st.size for st in to_read), len(to_read))
    archives = _archives(ctx, to_read)
    read_files(ctx, [st for st in to_read if st.path not in archives])
    read_archives(ctx, [st for st in to_read if st.path in archives], workers, archives)
    check_listings(ctx, walked, {st.path for st in to_read})
    count_still_flagged(ctx, {st.path for st in to_read})
    with transaction(ctx.conn):
        mirrors.mark_indexed(ctx.conn, ctx.mirror_id)
    ctx.progress.finish()
    return True


def _archives(ctx: MirrorContext, to_read: list[FileStat]) -> dict[str, str]:
    """Path -> format of the files of to_read that are archives vault opens (archive/formats.py: by their first
    bytes, read here once: the scan is handed the format)."""
    formats = archive_formats(ctx.mirror, to_read)
    for fmt in sorted(formats.values()):
        if fmt in NOT_OPENED:  # read as plain files (hashed, extractable whole); named in the summary
            label = "." + fmt if fmt != "multi-volume" else "multi-volume"
            ctx.report.not_opened[label] = ctx.report.not_opened.get(label, 0) + 1
        elif (line := missing_library(fmt)) and line not in ctx.report.missing_extras:
            ctx.report.missing_extras.append(line)
    return {path: fmt for path, fmt in formats.items() if fmt in OPENED}


def _walk(ctx: MirrorContext) -> tuple[list[FileStat], list[WalkProblem]]:
    """Every file of the mirror, names holding a credential redacted (remembered, so they are not opened)."""
    walked, problems = [], []
    for item in ctx.mirror.walk():
        if isinstance(item, WalkProblem):
            problems.append(item)
            continue
        if ctx.rules.found_in(item.path) or (item.link_target and ctx.rules.found_in(item.link_target)):
            link = ctx.rules.redact(item.link_target) if item.link_target else None
            item = item._replace(path=ctx.rules.redact(item.path), raw_path=None, link_target=link)
            ctx.secret_named.add(item.path)
        walked.append(item)
    return walked, problems


def _delete(ctx: MirrorContext, plan: Plan) -> None:
    """Files gone from the mirror leave the catalog; so do the seekable copies vault made of them."""
    copies = copies_of_files(ctx.conn, ctx.mirror_id, plan.deleted)
    with transaction(ctx.conn):
        generations.retire_paths(ctx.conn, ctx.mirror_id, plan.deleted, ctx.generation)
        catalog_files.delete_files(ctx.conn, ctx.mirror_id, plan.deleted)
    ctx.remove_unrecorded(copies)
    ctx.report.files_deleted += len(plan.deleted)


def _entries(ctx: MirrorContext, walked: list[FileStat]) -> list[tuple[Entry, bool]]:
    """Every top-level directory that the definition calls an entry, plus the manifest's, found or not."""
    definition = ctx.definition
    manifest = load_manifest(definition.manifest) if definition.manifest else {}
    on_disk = {ctx.rules.redact(name) for name in ctx.mirror.top_dirs() if definition.is_entry(name)}
    on_disk |= {entry_of(st.path) for st in walked if definition.is_entry(entry_of(st.path))}
    rows = [
        (manifest.get(name) or Entry(definition.name, name, "", "", "", "", (), "", "{}"), True)
        for name in sorted(on_disk)
    ]
    rows += [(entry, False) for name, entry in sorted(manifest.items()) if name not in on_disk]
    rows.append((Entry(definition.name, "", "top level of the mirror", "", "", "", (), "", "{}"), True))
    return rows
