"""Reads that `vault verify` needs: the catalog's own health, what was hashed, and archive members to re-check."""

from __future__ import annotations

import sqlite3
from collections import namedtuple
from collections.abc import Callable

from cloudvault.catalog.query import entry_filter
from cloudvault.catalog.rows import records_of
from cloudvault.models import Member

HashedFile = namedtuple("HashedFile", "file_id root path raw_path size blake3 archive_id")
Flagged = namedtuple("Flagged", "path member kind detail")
Unhashed = namedtuple("Unhashed", "path")
KEPT_FLAGS = ("changed_in_place", "damaged_frame", "damaged_member")  # see index/versions.py
UNREAD_FLAGS = ("encrypted_member", "unsupported_method")  # zip members vault does not read (archive/zip.py)

_MEMBERS = (
    "SELECT f.mirror_id, f.entry_id, mb.path, mb.raw_path, mb.type, mb.size, mb.mode, mb.mtime, mb.blake3, "
    "mb.link_target, f.path AS archive, f.id AS file_id, mb.data_offset, mb.raw_link_target, mb.sparse_map "
    "FROM members mb "
    "JOIN archives a ON a.id = mb.archive_id JOIN files f ON f.id = a.file_id "
    "WHERE mb.type = 'file' AND mb.blake3 IS NOT NULL"
)


def files_in_scope(conn: sqlite3.Connection, row: Callable, columns: str, rest: str,
                   scope: tuple[int, str] | None) -> list:  # fmt: skip
    """A row (a namedtuple, its fields by column name) for each file of the scope (one entry when scoped), by path:
    files f joined to its mirror m, then rest (more joins and a WHERE clause)."""
    where, args = entry_filter("f", scope)
    sql = f"SELECT {columns} FROM files f JOIN mirrors m ON m.id = f.mirror_id {rest}{where} ORDER BY f.path"
    return records_of(row, conn.execute(sql, args))


def integrity_problem(conn: sqlite3.Connection) -> str | None:
    """What SQLite's own integrity check finds wrong with the catalog file, or None when it is sound."""
    rows = [r[0] for r in conn.execute("PRAGMA integrity_check(5)")]
    return None if rows == ["ok"] else "; ".join(rows)


def hashed_files(conn: sqlite3.Connection, scope: tuple[int, str] | None) -> list[HashedFile]:
    """Plain files and archives of the scope with a recorded BLAKE3, by path; archive_id set for archives."""
    columns = "f.id AS file_id, m.root, f.path, f.raw_path, f.size, f.blake3, a.id AS archive_id"
    rest = "LEFT JOIN archives a ON a.file_id = f.id WHERE f.kind = 'file' AND f.blake3 IS NOT NULL"
    return files_in_scope(conn, HashedFile, columns, rest, scope)


def unhashed_files(conn: sqlite3.Connection, scope: tuple[int, str] | None) -> list[str]:
    """Regular files of the scope that were never hashed (unreadable when indexed, or a name that held a
    credential): verify cannot check them."""
    unhashed = files_in_scope(conn, Unhashed, "f.path", "WHERE f.kind = 'file' AND f.blake3 IS NULL", scope)
    return [u.path for u in unhashed]


def hashed_members(conn: sqlite3.Connection, archive_id: int) -> list[Member]:
    """The archive's file members with a recorded BLAKE3, in archive order."""
    sql = _MEMBERS + " AND a.id = ? ORDER BY mb.data_offset"
    return records_of(Member, conn.execute(sql, (archive_id,)))


def all_hashed_members(conn: sqlite3.Connection) -> list[Member]:
    """Every file member with a recorded BLAKE3 of every archive read whole, in read order."""
    sql = _MEMBERS + " AND a.status = 'ok' ORDER BY f.path, mb.data_offset"
    return records_of(Member, conn.execute(sql))


def unhashed_member_count(conn: sqlite3.Connection, scope: tuple[int, str] | None) -> int:
    """File members without a BLAKE3 (members of a damaged archive). A hardlink without one links to no earlier
    member: it has no data (GNU tar cannot extract it either; the index flags it). Members of an archive in a
    format vault does not open (an encrypted zip: status 'unsupported') are listed only, never hashed by design;
    so are the zip members vault does not read (UNREAD_FLAGS: `flagged_objects` names them)."""
    where, args = entry_filter("f", scope)
    sql = ("SELECT count(*) FROM members mb JOIN archives a ON a.id = mb.archive_id JOIN files f ON f.id = a.file_id "
           "WHERE mb.type = 'file' AND mb.blake3 IS NULL AND a.status != 'unsupported' AND NOT EXISTS (SELECT 1 "
           "FROM flags fl WHERE fl.file_id = f.id AND fl.member = mb.path AND fl.kind IN (?, ?))")  # fmt: skip
    return conn.execute(sql + where, (*UNREAD_FLAGS, *args)).fetchone()[0]


def hashed_member_count(conn: sqlite3.Connection, archive_id: int) -> int:
    sql = "SELECT count(*) FROM members WHERE archive_id = ? AND type = 'file' AND blake3 IS NOT NULL"
    return conn.execute(sql, (archive_id,)).fetchone()[0]


def flagged_objects(conn: sqlite3.Connection, scope: tuple[int, str] | None) -> list[Flagged]:
    """Files and members of the scope that `vault index` found changed in place or damaged (their recorded hash
    kept), zip members it does not read (UNREAD_FLAGS), and archives it could not read whole (not those in a format
    vault does not open: their file is checked whole): whatever their bytes hash to now, none of them is "as
    recorded"."""
    where, args = entry_filter("f", scope)
    kinds = KEPT_FLAGS + UNREAD_FLAGS
    marks = ",".join("?" * len(kinds))
    kept = conn.execute(
        f"SELECT f.path, fl.member, fl.kind, fl.detail FROM flags fl JOIN files f ON f.id = fl.file_id "
        f"WHERE fl.kind IN ({marks}){where} ORDER BY f.path, fl.member IS NOT NULL, fl.member, fl.id",
        (*kinds, *args),
    )
    unread = conn.execute(
        "SELECT f.path, NULL AS member, a.status AS kind, "
        "'flagged ' || a.status || ' when indexed: not all of it could be read' AS detail "
        f"FROM archives a JOIN files f ON f.id = a.file_id WHERE a.status NOT IN ('ok', 'unsupported')"
        f"{where} ORDER BY f.path",
        args,
    )
    return records_of(Flagged, kept) + records_of(Flagged, unread)
