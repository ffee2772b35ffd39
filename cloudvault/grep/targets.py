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


class Scope(NamedTuple):
    mirror_id: int
    entry_id: str
    glob: str | None


class Task(NamedTuple):
    """One archive (file_id its files row) or a batch of plain files (file_ids), with the globs that pick from it."""

    mirror_id: int
    entry_id: str
    path: str  # the archive's mirror path; '' for a batch of plain files
    size: int  # decompressed bytes, for the progress bar and to start the biggest first
    file_id: int | None
    file_ids: tuple[int, ...]
    globs: tuple[str, ...]


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
    return sorted(tasks, key=lambda t: -t.size)


def _wheres(scopes: list[Scope] | None):
    if scopes is None:
        return [("", [], None)]
    return [(" AND f.mirror_id = ? AND f.entry_id = ?", [s.mirror_id, s.entry_id], s.glob) for s in scopes]


def _archive_tasks(conn: sqlite3.Connection, where: str, args: list, globs: tuple[str, ...]) -> list[Task]:
    sql = ("SELECT f.id, f.mirror_id, f.entry_id, f.path, a.raw_size FROM files f JOIN archives a ON a.file_id = f.id "
           "WHERE 1" + where + " ORDER BY f.path")  # fmt: skip
    return [
        Task(row["mirror_id"], row["entry_id"], row["path"], row["raw_size"], row["id"], (), globs)
        for row in _rows(conn, sql, args)
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
    return Task(first["mirror_id"], first["entry_id"], "", size, None, tuple(r["id"] for r in batch), ())


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
    sql = ("SELECT ?, ?, mb.path, mb.raw_path, mb.type, mb.size, mb.mode, mb.mtime, mb.blake3, mb.link_target, ?, ?, "
           "mb.data_offset, mb.raw_link_target, mb.sparse_map FROM members mb JOIN archives a ON a.id = mb.archive_id "
           "WHERE a.file_id = ? AND mb.type IN ('file', 'hardlink')" + (" AND mb.size <= ?" if max_size else "") +
           " ORDER BY mb.data_offset")  # fmt: skip
    args = [task.mirror_id, task.entry_id, task.path, task.file_id, task.file_id] + ([max_size] if max_size else [])
    members = map(Member._make, conn.execute(sql, args))
    if not task.globs:
        return list(members)
    return [m for m in members if wanted(m.path, task.globs, archive_in_entry)]


def plain_files(conn: sqlite3.Connection, task: Task, max_size: int | None) -> list[Member]:
    """The task's plain files as Members (path within the entry; archive None), in path order."""
    marks = ", ".join("?" * len(task.file_ids))
    sql = ("SELECT mirror_id, entry_id, path, raw_path, 'file', size, mode, mtime_ns, blake3, NULL, NULL, id, 0 "
           f"FROM files WHERE id IN ({marks}) ORDER BY path")  # fmt: skip
    members = [Member(*row) for row in conn.execute(sql, task.file_ids)]
    members = [m._replace(path=within_entry(m.entry_id, m.path)) for m in members]
    return [m for m in members if not max_size or m.size <= max_size]
