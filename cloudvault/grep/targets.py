"""What a `vault grep` scope names, as work: one task per archive, plain files in batches; the members of one.

A scope is an entry (ID or unique prefix), `ENTRY:GLOB`, or nothing (the whole catalog). Only the archives of the
entries named become tasks, so a scoped grep opens nothing else. A glob without a `/` matches a name in any folder
(`*.log`), one with a `/` the path within the entry (`logs/*.log`); a member matches by its own path or by its
archive's; `!GLOB` leaves out what matches.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from fnmatch import fnmatchcase
from typing import NamedTuple

from cloudvault.catalog.contents import archives_in, frame_starts, members_between, plain_files_in, plain_members
from cloudvault.catalog.query import resolve_entry
from cloudvault.models import Member

FILES_PER_TASK = 64 << 20  # plain files are read in batches of about this many bytes, or this many files:
FILES_PER_BATCH = 4096
PIECE = 128 << 20  # a multi-frame archive is searched in pieces of about this many bytes, at frame starts
MEMBER_COST = 16 << 10  # a member costs about as much as this many bytes (its row, its hash, its scan)


class Scope(NamedTuple):
    mirror_id: int
    entry_id: str
    glob: str | None


class Task(NamedTuple):
    """One archive (file_id its files row) or a batch of plain files (file_ids), with the globs that pick from it."""

    mirror_id: int
    entry_id: str
    path: str  # the archive's mirror path; '' for a batch of plain files
    size: int  # decompressed bytes, for the progress bar
    file_id: int | None
    file_ids: tuple[int, ...]
    globs: tuple[str, ...]
    start: int = 0  # the piece of the archive's stream whose members are this task's (by data offset)
    stop: int | None = None
    cost: int = 0  # bytes, and members at MEMBER_COST each: the costliest start first


def resolve_scopes(conn: sqlite3.Connection, given: list[str]) -> list[Scope] | None:
    """Each SCOPE as an entry and a glob; None for the whole catalog."""
    scopes = []
    for text in given:
        entry, sep, glob = text.partition(":")
        if sep and not glob:
            entry, glob = text, ""  # `mirror:entry` spelled with the mirror
        mirror_id, entry_id, _ = resolve_entry(conn, entry)
        scopes.append(Scope(mirror_id, entry_id, glob or None))
    return scopes or None


def wanted(path: str, globs: tuple[str, ...], archive: str | None = None) -> bool:
    """Whether a path within its entry (a member's, with its archive's) is picked by the globs: each must hold
    (a `!GLOB` holds when neither matches); none: everything."""
    for glob in globs:
        negate, pattern = glob.startswith("!"), glob.removeprefix("!")
        hit = _matches(path, pattern) or (archive is not None and _matches(archive, pattern))
        if hit == negate:
            return False
    return True


def _matches(path: str, pattern: str) -> bool:
    return fnmatchcase(path if "/" in pattern else path.rsplit("/", 1)[-1], pattern) or fnmatchcase(path, pattern)


def plan(conn: sqlite3.Connection, scopes: list[Scope] | None, kind: str | None, globs: tuple[str, ...]) -> list[Task]:
    """Every archive and plain file the scopes hold, as tasks, the costliest first."""
    tasks: list[Task] = []
    for scope in scopes or [None]:
        where = (scope.mirror_id, scope.entry_id) if scope else None
        picked = globs + ((scope.glob,) if scope and scope.glob else ())
        if kind != "file":
            for row in archives_in(conn, where):
                left = _left_for_members(within_entry(row["entry_id"], row["path"]), picked)
                if left is not None:
                    whole = Task(row["mirror_id"], row["entry_id"], row["path"], row["raw_size"], row["file_id"], (),
                                 left)  # fmt: skip
                    tasks += _pieces(conn, whole, row)
        if kind != "member":
            tasks += _file_tasks(plain_files_in(conn, where), picked)
    return sorted(tasks, key=lambda t: -t.cost)


def _left_for_members(archive: str, globs: tuple[str, ...]) -> tuple[str, ...] | None:
    """The globs an archive's members must still be checked against: one its own path settles is dropped (a
    `!GLOB` it matches leaves none of them: None)."""
    left = []
    for glob in globs:
        if _matches(archive, glob.removeprefix("!")):
            if glob.startswith("!"):
                return None
            continue
        left.append(glob)
    return tuple(left)


def _pieces(conn: sqlite3.Connection, whole: Task, row: dict) -> list[Task]:
    """The archive as one task, or, when it has frames to enter at, as pieces of about PIECE bytes that workers
    search side by side (each piece's reader enters at its first member's frame)."""
    per_byte = whole.size + MEMBER_COST * row["member_count"]
    if row["frame_count"] < 2 or whole.size < 2 * PIECE:
        return [whole._replace(cost=per_byte)]
    cuts, want = [0], PIECE
    for offset in frame_starts(conn, row["archive_id"]):
        if offset >= want and whole.size - offset >= PIECE // 2:
            cuts.append(offset)
            want = offset + PIECE
    bounds = [*cuts, whole.size]
    return [
        whole._replace(
            size=stop - start,
            start=start,
            stop=stop if stop < whole.size else None,
            cost=per_byte * (stop - start) // max(whole.size, 1),
        )  # fmt: skip
        for start, stop in zip(bounds, bounds[1:], strict=False)
    ]


def _file_tasks(rows: list[dict], globs: tuple[str, ...]) -> list[Task]:
    """Plain files in batches of about FILES_PER_TASK bytes, one entry per batch."""
    tasks, batch, size = [], [], 0
    for row in rows:
        if not wanted(within_entry(row["entry_id"], row["path"]), globs):
            continue
        full = size + row["size"] > FILES_PER_TASK or len(batch) >= FILES_PER_BATCH
        if batch and (full or (batch[0]["mirror_id"], batch[0]["entry_id"]) != (row["mirror_id"], row["entry_id"])):
            tasks.append(_file_task(batch, size))
            batch, size = [], 0
        batch.append(row)
        size += row["size"]
    return [*tasks, _file_task(batch, size)] if batch else tasks


def _file_task(batch: list, size: int) -> Task:
    first = batch[0]
    ids = tuple(r["file_id"] for r in batch)
    return Task(first["mirror_id"], first["entry_id"], "", size, None, ids, (), cost=size + MEMBER_COST * len(ids))


def within_entry(entry_id: str, path: str) -> str:
    """A mirror path as the path within its entry (the entry's own folder left off)."""
    return path[len(entry_id) + 1 :] if entry_id and path.startswith(f"{entry_id}/") else path


def archive_members(conn: sqlite3.Connection, task: Task, max_size: int | None) -> Iterator[Member]:
    """The members of the task's piece of its archive with bytes to search, in data-offset order, picked by the
    globs the archive's own path did not settle."""
    archive = (task.mirror_id, task.entry_id, task.path, task.file_id)
    plain = tuple(g for g in task.globs if not g.startswith("!") and "[" not in g)  # the same in SQLite's GLOB
    members = members_between(conn, archive, task.start, task.stop, max_size, plain)
    if not task.globs:
        return members
    return (m for m in members if wanted(m.path, task.globs))


def plain_files(conn: sqlite3.Connection, task: Task, max_size: int | None) -> list[Member]:
    """The task's plain files as Members (path within the entry; archive None), in path order."""
    members = [m._replace(path=within_entry(m.entry_id, m.path)) for m in plain_members(conn, task.file_ids)]
    return [m for m in members if not max_size or m.size <= max_size]
