"""What a `vault grep` scope names, as work: one task per archive, plain files in batches; the members of one.

A scope is an entry (ID or unique prefix), `ENTRY:GLOB`, or nothing (the whole catalog). Only the archives of the
entries named become tasks, so a scoped grep opens nothing else. A glob without a `/` matches a name in any folder
(`*.log`), one with a `/` the path within the entry (`logs/*.log`); a member matches by its own path or by its
archive's; `!GLOB` leaves out what matches.
"""

from __future__ import annotations

import sqlite3
from fnmatch import fnmatchcase
from typing import NamedTuple

from cloudvault.catalog.query import resolve_entry
from cloudvault.models import Member

FILES_PER_TASK = 64 << 20  # plain files are read in batches of about this many bytes
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
    """Every archive and plain file the scopes hold, as tasks, biggest first."""
    tasks: list[Task] = []
    for where, args, scope_glob in _wheres(scopes):
        picked = globs + ((scope_glob,) if scope_glob else ())
        if kind != "file":
            tasks += _archive_tasks(conn, where, args, picked)
        if kind != "member":
            tasks += _file_tasks(conn, where, args, picked)
    return sorted(tasks, key=lambda t: -t.cost)


def _wheres(scopes: list[Scope] | None):
    if scopes is None:
        return [("", [], None)]
    return [(" AND f.mirror_id = ? AND f.entry_id = ?", [s.mirror_id, s.entry_id], s.glob) for s in scopes]


def _archive_tasks(conn: sqlite3.Connection, where: str, args: list, globs: tuple[str, ...]) -> list[Task]:
    sql = ("SELECT f.id, f.mirror_id, f.entry_id, f.path, a.id AS archive_id, a.raw_size, a.member_count, "
           "a.frame_count FROM files f JOIN archives a ON a.file_id = f.id WHERE 1" + where +
           " ORDER BY f.path")  # fmt: skip
    tasks = []
    for row in _rows(conn, sql, args):
        whole = Task(row["mirror_id"], row["entry_id"], row["path"], row["raw_size"], row["id"], (), globs)
        tasks += _pieces(conn, whole, row)
    return tasks


def _pieces(conn: sqlite3.Connection, whole: Task, row: dict) -> list[Task]:
    """The archive as one task, or, when it has frames to enter at, as pieces of about PIECE bytes that workers
    search side by side (each piece's reader enters at its first member's frame)."""
    per_byte = whole.size + MEMBER_COST * row["member_count"]
    if row["frame_count"] < 2 or whole.size < 2 * PIECE:
        return [whole._replace(cost=per_byte)]
    cuts, want = [0], PIECE
    for (offset,) in conn.execute("SELECT raw_offset FROM frames WHERE archive_id = ? ORDER BY idx",
                                  (row["archive_id"],)):  # fmt: skip
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


def _file_tasks(conn: sqlite3.Connection, where: str, args: list, globs: tuple[str, ...]) -> list[Task]:
    sql = ("SELECT f.id, f.mirror_id, f.entry_id, f.path, f.size FROM files f WHERE f.kind = 'file' "
           "AND f.id NOT IN (SELECT file_id FROM archives)" + where +
           " ORDER BY f.mirror_id, f.entry_id, f.path")  # fmt: skip
    tasks, batch, size = [], [], 0
    for row in _rows(conn, sql, args):
        if not wanted(within_entry(row["entry_id"], row["path"]), globs):
            continue
        if batch and (size + row["size"] > FILES_PER_TASK or (batch[0]["mirror_id"], batch[0]["entry_id"])
                      != (row["mirror_id"], row["entry_id"])):  # fmt: skip
            tasks.append(_file_task(batch, size))
            batch, size = [], 0
        batch.append(row)
        size += row["size"]
    return [*tasks, _file_task(batch, size)] if batch else tasks


def _file_task(batch: list, size: int) -> Task:
    first = batch[0]
    ids = tuple(r["id"] for r in batch)
    return Task(first["mirror_id"], first["entry_id"], "", size, None, ids, (), cost=size + MEMBER_COST * len(ids))


def _rows(conn: sqlite3.Connection, sql: str, args: list) -> list[sqlite3.Row]:
    cursor = conn.execute(sql, args)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def within_entry(entry_id: str, path: str) -> str:
    """A mirror path as the path within its entry (the entry's own folder left off)."""
    return path[len(entry_id) + 1 :] if entry_id and path.startswith(f"{entry_id}/") else path


def archive_members(conn: sqlite3.Connection, task: Task, max_size: int | None) -> list[Member]:
    """The members of the task's archive with bytes to search (files, hardlinks to them), in data-offset order,
    picked by the task's globs (a member by its path or its archive's)."""
    archive_in_entry = within_entry(task.entry_id, task.path)
    sql = ("SELECT mb.path, mb.type, mb.size, mb.blake3, mb.link_target, mb.data_offset, mb.sparse_map "
           "FROM members mb WHERE mb.archive_id = (SELECT id FROM archives WHERE file_id = ?) "
           "AND mb.type IN ('file', 'hardlink') AND mb.data_offset >= ?" + (" AND mb.data_offset < ?" if task.stop
           else "") + (" AND mb.size <= ?" if max_size else ""))  # fmt: skip
    head, fid = (task.mirror_id, task.entry_id), task.file_id
    args = [fid, task.start] + ([task.stop] if task.stop else []) + ([max_size] if max_size else [])
    rows = conn.execute(sql, args)
    # only what reading needs (mode, mtime, raw names stay in the catalog): 200,000 rows are read in a blink
    members = [
        Member(*head, p, None, t, n, None, None, b, lt, task.path, fid, o, None, sm) for p, t, n, b, lt, o, sm in rows
    ]
    members.sort(key=_offset)  # already in order, as the index wrote them: a pass to be sure
    if not task.globs:
        return members
    return [m for m in members if wanted(m.path, task.globs, archive_in_entry)]


def plain_files(conn: sqlite3.Connection, task: Task, max_size: int | None) -> list[Member]:
    """The task's plain files as Members (path within the entry; archive None), in path order."""
    marks = ", ".join("?" * len(task.file_ids))
    sql = ("SELECT mirror_id, entry_id, path, raw_path, 'file', size, mode, mtime_ns, blake3, NULL, NULL, id, 0 "
           f"FROM files WHERE id IN ({marks}) ORDER BY path")  # fmt: skip
    members = [Member(*row) for row in conn.execute(sql, task.file_ids)]
    members = [m._replace(path=within_entry(m.entry_id, m.path)) for m in members]
    return [m for m in members if not max_size or m.size <= max_size]


def _offset(member: Member) -> int:
    return member.data_offset
