"""The catalog's rows a mounted tree is laid out from, read by column name: mirrors, files with their archives,
secret flags, and one archive's members at or under a path (by the members_archive_path index: an archive of
200,000 members is never read whole to answer one lookup).

A member's path is matched as `tar -x` would place it: without leading or trailing slashes; a member with a `..`
component, or of a type no folder can show, is not there at all."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from cloudvault.models import Member

SHOWN_TYPES = ("file", "hardlink", "symlink", "dir", "fifo", "chardev", "blockdev")
_SAFE = (
    f"mb.type IN ({', '.join(repr(t) for t in SHOWN_TYPES)}) AND ('/' || mb.path || '/') NOT LIKE '%/../%' "
    "AND trim(mb.path, '/') NOT IN ('', '.')"
)
_MEMBER_COLUMNS = (
    "mb.path, mb.raw_path, mb.type, mb.size, mb.mode, mb.mtime, mb.blake3, mb.link_target, mb.data_offset, "
    "mb.raw_link_target, mb.sparse_map"
)


def _rows(conn: sqlite3.Connection, sql: str, args) -> Iterator[sqlite3.Row]:
    cursor = conn.cursor()
    cursor.row_factory = sqlite3.Row
    return cursor.execute(sql, args)


def mirrors(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Every mirror: id, name, root."""
    return list(_rows(conn, "SELECT id, name, root FROM mirrors ORDER BY id", ()))


def mirror_files(conn: sqlite3.Connection, mirror_id: int, entry_id: str | None = None) -> list[sqlite3.Row]:
    """The mirror's files (or one entry's), by path: id, entry_id, path, raw_path, kind, size, mode, mtime_ns,
    blake3, link_target, and archive_id and archive_status where the file is an indexed archive."""
    where, args = ("AND f.entry_id = ?", [entry_id]) if entry_id is not None else ("", [])
    sql = (
        "SELECT f.id, f.entry_id, f.path, f.raw_path, f.kind, f.size, f.mode, f.mtime_ns, f.blake3, f.link_target, "
        "a.id AS archive_id, a.status AS archive_status FROM files f LEFT JOIN archives a ON a.file_id = f.id "
        f"WHERE f.mirror_id = ? {where} ORDER BY f.path"
    )
    return list(_rows(conn, sql, [mirror_id, *args]))


def secret_flags(conn: sqlite3.Connection, mirror_id: int) -> dict[tuple[int, str | None], str]:
    """(file id, member path or None) -> why it is flagged, for every secret the mirror's index found."""
    sql = "SELECT file_id, member, detail FROM flags WHERE mirror_id = ? AND kind = 'secret'"
    return {(r["file_id"], r["member"]): r["detail"] for r in _rows(conn, sql, (mirror_id,))}


def members_at(conn: sqlite3.Connection, archive_id: int, path: str, archive: Member) -> list[Member]:
    """The members of the archive placed at path (no slashes at its ends), in stored order (a later one is an
    update that wins). archive: a Member naming the archive (mirror, entry, path, file id) the members are in."""
    sql = f"SELECT {_MEMBER_COLUMNS} FROM members mb WHERE mb.archive_id = ? AND mb.path IN (?, ?, ?, ?) AND {_SAFE} "
    sql += "ORDER BY mb.data_offset"
    variants = (path, f"{path}/", f"/{path}", f"/{path}/")
    return [_member(row, archive) for row in _rows(conn, sql, (archive_id, *variants))]


def members_under(
    conn: sqlite3.Connection, archive_id: int, path: str, archive: Member, most: int
) -> list[Member] | None:
    """Every member under the folder path ('' the archive's top), at any depth, in stored order; None if there are
    more than most of them (a listing then asks names_under, and each lookup its own)."""
    ranges = "(mb.path > ? AND mb.path < ?) OR (mb.path > ? AND mb.path < ?)" if path else "1"
    args = (f"{path}/", f"{path}0", f"/{path}/", f"/{path}0") if path else ()
    sql = f"SELECT count(*) FROM (SELECT 1 FROM members mb WHERE mb.archive_id = ? AND ({ranges}) LIMIT ?)"
    if conn.execute(sql, (archive_id, *args, most + 1)).fetchone()[0] > most:
        return None
    sql = f"SELECT {_MEMBER_COLUMNS} FROM members mb WHERE mb.archive_id = ? AND ({ranges}) AND {_SAFE} "
    return [_member(row, archive) for row in _rows(conn, sql + "ORDER BY mb.data_offset", (archive_id, *args))]


def any_under(conn: sqlite3.Connection, archive_id: int, path: str, after: int = -1) -> bool:
    """Whether a member stored after the data offset `after` lies under the folder path (it makes path a folder)."""
    sql = f"SELECT 1 FROM members mb WHERE mb.archive_id = ? AND mb.data_offset > ? AND {_SAFE} AND "
    sql += "((mb.path > ? AND mb.path < ?) OR (mb.path > ? AND mb.path < ?)) LIMIT 1"
    found = conn.execute(sql, (archive_id, after, f"{path}/", f"{path}0", f"/{path}/", f"/{path}0")).fetchone()
    return found is not None


def names_under(conn: sqlite3.Connection, archive_id: int, path: str) -> list[str]:
    """The names directly inside the folder path of the archive ('' its top), each once, by name: a skip scan of
    the index, one query per name (a folder of 3 names in an archive of 200,000 members costs 4 queries)."""
    bases = [f"{path}/", f"/{path}/"] if path else ["", "/"]
    names: set[str] = set()
    for base in bases:
        below = base[:-1] + "0" if base else "\U0010ffff"  # "0" sorts right after "/": the end of base's range
        cursor = base
        while True:
            row = conn.execute(
                "SELECT path FROM members WHERE archive_id = ? AND path > ? AND path < ? ORDER BY path LIMIT 1",
                (archive_id, cursor, below),
            ).fetchone()
            if row is None:
                break
            name, under, _ = row[0][len(base) :].partition("/")
            names.add(name)
            cursor = f"{base}{name}/\U0010ffff" if under else row[0]  # past name/...; name.bak may follow name
    return sorted(names - {"", ".", ".."})


def _member(row: sqlite3.Row, archive: Member) -> Member:
    return Member(mirror_id=archive.mirror_id, entry_id=archive.entry_id, path=row["path"], raw_path=row["raw_path"],
                  type=row["type"], size=row["size"], mode=row["mode"], mtime=row["mtime"], blake3=row["blake3"],
                  link_target=row["link_target"], archive=archive.path, file_id=archive.file_id,
                  data_offset=row["data_offset"], raw_link_target=row["raw_link_target"],
                  sparse_map=row["sparse_map"])  # fmt: skip
