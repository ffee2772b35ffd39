"""Reads of what `vault grep` searches: a scope's archives and plain files, an archive's frame starts, and the
members of one piece of an archive (or a batch of plain files) as Members, in the order their bytes are read."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from cloudvault.catalog.query import entry_filter
from cloudvault.catalog.rows import records_of
from cloudvault.models import Member


def _rows(conn: sqlite3.Connection, sql: str, args: list) -> list[dict]:
    cursor = conn.execute(sql, args)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def archives_in(conn: sqlite3.Connection, scope: tuple[int, str] | None) -> list[dict]:
    """The archives of one entry (or of the catalog): file id, entry, path, sizes and counts."""
    where, args = entry_filter("f", scope)
    sql = ("SELECT f.id AS file_id, f.mirror_id, f.entry_id, f.path, a.id AS archive_id, a.raw_size, "
           "a.member_count, a.frame_count FROM files f JOIN archives a ON a.file_id = f.id WHERE 1" + where +
           " ORDER BY f.path")  # fmt: skip
    return _rows(conn, sql, args)


def plain_files_in(conn: sqlite3.Connection, scope: tuple[int, str] | None) -> list[dict]:
    """The regular files of one entry (or of the catalog) that are not archives, by entry and path."""
    where, args = entry_filter("f", scope)
    sql = ("SELECT f.id AS file_id, f.mirror_id, f.entry_id, f.path, f.size FROM files f WHERE f.kind = 'file' "
           "AND f.id NOT IN (SELECT file_id FROM archives)" + where +
           " ORDER BY f.mirror_id, f.entry_id, f.path")  # fmt: skip
    return _rows(conn, sql, args)


def frame_starts(conn: sqlite3.Connection, archive_id: int) -> list[int]:
    """Where each frame of the archive starts in its decompressed stream."""
    sql = "SELECT raw_offset FROM frames WHERE archive_id = ? ORDER BY idx"
    return [offset for (offset,) in conn.execute(sql, (archive_id,))]


def members_between(
    conn: sqlite3.Connection,
    archive: tuple[int, str, str, int],
    start: int,
    stop: int | None,
    max_size: int | None,
    globs: tuple[str, ...] = (),
) -> Iterator[Member]:
    """The members with bytes (files, hardlinks) whose data starts in [start, stop) of the stream of archive
    (mirror id, entry, its mirror path, its file id), in data-offset order, as the rows come (an archive of
    millions of members is never a list). Only what reading needs is read (mode, mtime and raw names stay in
    the catalog). globs: SQLite GLOBs one of whose forms (the pattern, or `*/` and the pattern for a name in any
    folder) each member's path must match: a pre-filter run in SQLite, the caller checks its own rules after."""
    sql = ("SELECT mb.path, mb.type, mb.size, mb.blake3, mb.link_target, mb.data_offset, mb.sparse_map "
           "FROM members mb WHERE mb.archive_id = (SELECT id FROM archives WHERE file_id = ?) "
           "AND mb.type IN ('file', 'hardlink') AND mb.data_offset >= ?" + (" AND mb.data_offset < ?" if stop
           else "") + (" AND mb.size <= ?" if max_size else "") +
           " AND (mb.path GLOB ? OR mb.path GLOB ?)" * len(globs) + " ORDER BY mb.data_offset")  # fmt: skip
    mirror_id, entry_id, path, file_id = archive
    args = [file_id, start] + ([stop] if stop else []) + ([max_size] if max_size else [])
    args += [form for glob in globs for form in (glob, "*/" + glob)]
    for p, t, n, b, lt, o, sm in conn.execute(sql, args):
        yield Member(mirror_id, entry_id, p, None, t, n, None, None, b, lt, path, file_id, o, None, sm)


def plain_members(conn: sqlite3.Connection, file_ids: tuple[int, ...]) -> list[Member]:
    """Plain files as Members (path still the mirror path; archive None), in path order."""
    marks = ", ".join("?" * len(file_ids))
    sql = ("SELECT mirror_id, entry_id, path, raw_path, 'file' AS type, size, mode, mtime_ns AS mtime, blake3, "
           "NULL AS link_target, NULL AS archive, id AS file_id, 0 AS data_offset "
           f"FROM files WHERE id IN ({marks}) ORDER BY path")  # fmt: skip
    return records_of(Member, conn.execute(sql, file_ids))
