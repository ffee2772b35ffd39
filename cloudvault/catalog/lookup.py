"""Reads that find catalog members and where their bytes live: by exact path, glob, folder or suffix."""

from __future__ import annotations

import sqlite3

from cloudvault.catalog.query import like_escape
from cloudvault.catalog.rows import record_of, records_of
from cloudvault.models import Frame, Member, NestedArchive

MEMBER_SELECT = (
    "SELECT f.mirror_id, f.entry_id, mb.path, mb.raw_path, mb.type, mb.size, mb.mode, mb.mtime, mb.blake3, "
    "mb.link_target, f.path AS archive, f.id AS file_id, mb.data_offset, mb.raw_link_target, mb.sparse_map "
    "FROM members mb "
    "JOIN archives a ON a.id = mb.archive_id JOIN files f ON f.id = a.file_id WHERE f.mirror_id = ? AND f.entry_id = ?"
)
FILE_SELECT = (
    "SELECT mirror_id, entry_id, path, raw_path, kind AS type, size, mode, mtime_ns AS mtime, blake3, link_target, "
    "NULL AS archive, id AS file_id, 0 AS data_offset "
    "FROM files f WHERE f.mirror_id = ? AND f.entry_id = ?"
)


def _plain_member(member: Member) -> Member:
    """A files row as a Member: its path within the entry, seconds for mtime, the file's own id."""
    prefix = f"{member.entry_id}/" if member.entry_id else ""
    kind = "file" if member.type == "file" else "symlink"
    return member._replace(path=member.path[len(prefix) :], type=kind, mtime=member.mtime // 10**9)


class EntryMembers:
    """The members and plain files of one entry, looked up by the ways `vault extract` names them."""

    def __init__(self, conn: sqlite3.Connection, mirror_id: int, entry_id: str, archive: str | None = None):
        self.conn = conn
        self.scope = [mirror_id, entry_id]
        self.prefix = f"{entry_id}/" if entry_id else ""
        self.archive_sql, self.archive_args = "", []
        if archive:
            self.archive_sql = " AND (f.path LIKE ? ESCAPE '\\' OR f.path = ?)"
            self.archive_args = [f"%/{like_escape(archive)}%", self.prefix + archive]
        self.members_only = archive is not None

    def _members(self, where: str, args: list, order: str = "") -> list[Member]:
        sql = MEMBER_SELECT + self.archive_sql + where + order
        return records_of(Member, self.conn.execute(sql, [*self.scope, *self.archive_args, *args]))

    def _files(self, where: str, args: list) -> list[Member]:
        if self.members_only:
            return []
        sql = FILE_SELECT + where + " ORDER BY path"
        return [_plain_member(m) for m in records_of(Member, self.conn.execute(sql, [*self.scope, *args]))]

    def exact(self, path: str) -> list[Member]:
        members = [m for m in self._members(" AND mb.path = ?", [path]) if m.type != "dir"]
        return members + self._files(" AND f.path = ?", [self.prefix + path])

    def glob(self, pattern: str) -> list[Member]:
        members = self._members(" AND mb.path GLOB ?", [pattern], " ORDER BY f.path, mb.data_offset")
        return members + self._files(" AND f.path GLOB ?", [self.prefix + pattern])

    def under(self, folder: str) -> list[Member]:
        return self._members(" AND mb.path LIKE ? ESCAPE '\\'", [like_escape(folder) + "/%"],
                             " ORDER BY f.path, mb.data_offset")  # fmt: skip

    def suffix(self, tail: str) -> list[Member]:
        pattern = "%/" + like_escape(tail)
        return self._members(" AND mb.path LIKE ? ESCAPE '\\'", [pattern]) + self._files(
            " AND f.path LIKE ? ESCAPE '\\'", [pattern]
        )

    def all_paths(self) -> list[str]:
        return [m.path for m in self._members("", [])]


def member_before(conn: sqlite3.Connection, file_id: int, path: str, offset: int) -> Member | None:
    """The last member at path stored before offset in the archive whose files row is file_id: what a hardlink
    at offset links to (a later member of that name, a `tar -r` update, is not its target)."""
    return record_of(Member, conn.execute(
        MEMBER_SELECT.replace("WHERE f.mirror_id = ? AND f.entry_id = ?", "WHERE f.id = ?")
        + " AND mb.path = ? AND mb.data_offset < ? ORDER BY mb.data_offset DESC LIMIT 1",
        (file_id, path, offset),
    ))  # fmt: skip


def member_at(conn: sqlite3.Connection, file_id: int, path: str, offset: int) -> Member | None:
    """The member at path whose data starts at offset in the archive whose files row is file_id."""
    return record_of(Member, conn.execute(
        MEMBER_SELECT.replace("WHERE f.mirror_id = ? AND f.entry_id = ?", "WHERE f.id = ?")
        + " AND mb.path = ? AND mb.data_offset = ?", (file_id, path, offset)))  # fmt: skip


def nested_archives(conn: sqlite3.Connection, file_id: int) -> list[NestedArchive]:
    """The archives the archive whose files row is file_id holds as members, read once more (archive/nested.py)."""
    return records_of(NestedArchive, conn.execute(
        "SELECT n.raw_offset, n.raw_size, n.format, n.status, n.member_path, n.member_offset FROM nested n "
        "JOIN archives a ON a.id = n.archive_id WHERE a.file_id = ? ORDER BY n.raw_offset", (file_id,)))  # fmt: skip


class ArchiveLocation:
    """Where an indexed archive is, how it looked when indexed, and its seekable copy if one was made."""

    def __init__(self, row: tuple) -> None:
        (self.archive_id, self.size, self.mtime_ns, self.status, self.path, self.raw_path, self.entry_id,
         self.root, self.copy_path, self.copy_size, self.format) = row  # fmt: skip


def archive_location(conn: sqlite3.Connection, file_id: int) -> ArchiveLocation:
    row = conn.execute(
        "SELECT a.id, f.size, f.mtime_ns, a.status, f.path, f.raw_path, f.entry_id, m.root, s.path, s.comp_size, "
        "a.format "
        "FROM archives a JOIN files f ON f.id = a.file_id JOIN mirrors m ON m.id = f.mirror_id "
        "LEFT JOIN seekable s ON s.archive_id = a.id WHERE f.id = ?",
        (file_id,),
    ).fetchone()
    return ArchiveLocation(row)


def frame_table(conn: sqlite3.Connection, archive_id: int, *, seekable_copy: bool = False) -> list[Frame]:
    """The frames of the archive, or of its seekable copy."""
    table = "seekable_frames" if seekable_copy else "frames"
    sql = f"SELECT comp_offset, comp_size, raw_offset, raw_size FROM {table} WHERE archive_id = ? ORDER BY idx"
    return records_of(Frame, conn.execute(sql, (archive_id,)))


def archive_format(conn: sqlite3.Connection, file_id: int) -> tuple[str, tuple[str, bytes] | None]:
    """The format of the archive that is this file (archive/formats.py), and its seek points as (kind, data) when
    it has some (a gzip or bzip2 archive: archive/decoded.py)."""
    row = conn.execute("SELECT a.format, s.kind, s.data FROM archives a LEFT JOIN seek_points s ON s.archive_id = a.id "
                       "WHERE a.file_id = ?", (file_id,)).fetchone()  # fmt: skip
    return row[0], (row[1], row[2]) if row[1] is not None else None


def file_location(conn: sqlite3.Connection, file_id: int) -> tuple[str, str, bytes | None, int, int]:
    """(mirror root, path, raw path, size, mtime_ns) of a plain file."""
    return conn.execute(
        "SELECT m.root, f.path, f.raw_path, f.size, f.mtime_ns FROM files f JOIN mirrors m ON m.id = f.mirror_id "
        "WHERE f.id = ?",
        (file_id,),
    ).fetchone()


def file_pieces(conn: sqlite3.Connection, file_id: int) -> bytes | None:
    """The piece hashes of a plain file (or of an archive file's own bytes)."""
    row = conn.execute("SELECT pieces FROM files WHERE id = ?", (file_id,)).fetchone()
    return row[0] if row else None


def archive_pieces(conn: sqlite3.Connection, file_id: int) -> dict[tuple[int, str], bytes]:
    """(data offset, path) -> piece hashes of every member of the archive that has them (those over a piece)."""
    return {(offset, path): pieces for offset, path, pieces in conn.execute(
        "SELECT mb.data_offset, mb.path, mb.pieces FROM members mb JOIN archives a ON a.id = mb.archive_id "
        "WHERE a.file_id = ? AND mb.pieces IS NOT NULL", (file_id,))}  # fmt: skip


def member_pieces(conn: sqlite3.Connection, file_id: int, offset: int, path: str) -> bytes | None:
    """The piece hashes of the one member of the archive (files row file_id) at that data offset and path (None:
    it has none, being one piece or recorded before them): one indexed lookup, not the whole archive's."""
    row = conn.execute(
        "SELECT mb.pieces FROM members mb JOIN archives a ON a.id = mb.archive_id "
        "WHERE a.file_id = ? AND mb.path = ? AND mb.data_offset = ?",
        (file_id, path, offset),
    ).fetchone()
    return row[0] if row else None


def last_member(conn: sqlite3.Connection, archive_name: str) -> str:
    """The file member stored last in the archive of that file name (the worst case for a plain extract)."""
    return conn.execute(
        "SELECT m.path FROM members m JOIN archives a ON a.id = m.archive_id JOIN files f ON f.id = a.file_id "
        "WHERE f.path LIKE ? ESCAPE '\\' AND m.type = 'file' ORDER BY m.data_offset DESC LIMIT 1",
        ("%" + like_escape(archive_name),),
    ).fetchone()[0]
