"""The files, archives, frames, members and flags tables: what `vault index` writes of a mirror's files and
reads back to know what changed. Callers own transactions."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator

from cloudvault.catalog.mirrors import mirror_named
from cloudvault.catalog.shards import MEMBER_COLUMNS
from cloudvault.models import FileStat, Flag

RETRY_KINDS = ("unreadable", "changed_while_indexing")  # files read again on the next run whatever their stat
_RETRY = ",".join(f"'{kind}'" for kind in RETRY_KINDS)


def delete_files(conn: sqlite3.Connection, mirror_id: int, paths: Iterable[str]) -> None:
    conn.executemany("DELETE FROM files WHERE mirror_id = ? AND path = ?", [(mirror_id, p) for p in paths])


def insert_file(conn: sqlite3.Connection, mirror_id: int, entry_id: str, st: FileStat, digest: str | None,
                pieces: bytes | None = None) -> int:  # fmt: skip
    """The file's row (replacing the one at its path): its signature, BLAKE3 and piece hashes."""
    conn.execute("DELETE FROM files WHERE mirror_id = ? AND path = ?", (mirror_id, st.path))
    cur = conn.execute(
        "INSERT INTO files(mirror_id, entry_id, path, raw_path, kind, size, mtime_ns, ctime_ns, inode, mode,"
        " link_target, blake3, pieces) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            mirror_id,
            entry_id,
            st.path,
            st.raw_path,
            st.kind,
            st.size,
            st.mtime_ns,
            st.ctime_ns,
            st.inode,
            st.mode,
            st.link_target,
            digest,
            pieces,
        ),
    )
    return cur.lastrowid


def insert_doc(conn: sqlite3.Connection, file_id: int, body: str) -> None:
    conn.execute("INSERT INTO docs(file_id, body) VALUES (?, ?)", (file_id, body))


def insert_flags(
    conn: sqlite3.Connection, mirror_id: int, entry_id: str, file_id: int | None, flags: Iterable[Flag]
) -> None:
    conn.executemany(
        "INSERT INTO flags(mirror_id, entry_id, file_id, member, kind, detail) VALUES (?,?,?,?,?,?)",
        [(mirror_id, entry_id, file_id, f.member, f.kind, f.detail) for f in flags],
    )


def clear_flags(conn: sqlite3.Connection, mirror_id: int, kind: str, file_id: int | None = None) -> None:
    """Drop flags of a kind that a step is about to re-check: the mirror's, or one file's."""
    if file_id is None:
        conn.execute("DELETE FROM flags WHERE mirror_id = ? AND kind = ?", (mirror_id, kind))
    else:
        conn.execute("DELETE FROM flags WHERE file_id = ? AND kind = ?", (file_id, kind))


def insert_archive(conn: sqlite3.Connection, file_id: int, scan, shard_alias: str, rows: tuple[int, int]) -> int:
    """The archive row, its frame table, and its members (rows: their rowid range) copied from an attached shard;
    scan is what the archive scan found (status, raw_size, member_count, frames: see archive.scan.ScanResult)."""
    cur = conn.execute(
        "INSERT INTO archives(file_id, status, raw_size, member_count, frame_count, format) VALUES (?,?,?,?,?,?)",
        (file_id, scan.status, scan.raw_size, scan.member_count, len(scan.frames), scan.format),
    )
    archive_id = cur.lastrowid
    if scan.seek_points is not None:
        conn.execute("INSERT INTO seek_points(archive_id, kind, data) VALUES (?,?,?)", (archive_id, *scan.seek_points))
    conn.executemany(
        "INSERT INTO frames(archive_id, idx, comp_offset, comp_size, raw_offset, raw_size) VALUES (?,?,?,?,?,?)",
        [(archive_id, i, f.comp_offset, f.comp_size, f.raw_offset, f.raw_size) for i, f in enumerate(scan.frames)],
    )
    conn.executemany(
        "INSERT INTO nested(archive_id, raw_offset, raw_size, format, status, member_path, member_offset) "
        "VALUES (?,?,?,?,?,?,?)",
        [(archive_id, *n) for n in scan.nested],
    )
    insert_members(conn, archive_id, shard_alias, rows)
    return archive_id


def insert_members(conn: sqlite3.Connection, archive_id: int, alias: str, rows: tuple[int, int]) -> None:
    """An archive's members copied from the attached shard (its run of rowids) into the catalog, then into the
    search index."""
    after = conn.execute("SELECT coalesce(max(id), 0) FROM members").fetchone()[0]
    conn.execute(
        f"INSERT INTO members(archive_id, {MEMBER_COLUMNS}) SELECT ?, {MEMBER_COLUMNS} FROM {alias}.members "
        "WHERE rowid BETWEEN ? AND ? ORDER BY rowid",
        (archive_id, *rows),
    )
    build_member_search(conn, archive_id, after)


def build_member_search(conn: sqlite3.Connection, archive_id: int, after: int) -> None:
    """The search rows (members_fts) of the archive's members, whose ids are those above after: one pass in id
    order once the rows are in (FTS5 appends ids that rise; a trigger per row cost ~0.5 us a member more), inside
    the caller's transaction, so an index stopped before its commit leaves neither rows nor search rows."""
    # `+archive_id`: read as a range of ids, not through the path index (whose order would need a sort)
    conn.execute("INSERT INTO members_fts(rowid, path) SELECT id, path FROM members WHERE id > ? "
                 "AND +archive_id = ? ORDER BY id", (after, archive_id))  # fmt: skip


def set_list_status(conn: sqlite3.Connection, archive_id: int, status: str | None) -> None:
    conn.execute("UPDATE archives SET list_status = ? WHERE id = ?", (status, archive_id))


def known_files(conn: sqlite3.Connection, mirror_id: int) -> dict[str, tuple[int, int, int, int]]:
    """path -> (size, mtime_ns, inode, ctime_ns) as recorded; a file flagged unreadable or changed while being
    indexed gets an impossible signature, so the next run reads it again even when its stat is the same."""
    rows = conn.execute(
        "SELECT path, size, mtime_ns, inode, ctime_ns, EXISTS (SELECT 1 FROM flags fl WHERE fl.file_id = f.id "
        f"AND fl.kind IN ({_RETRY})) FROM files f WHERE mirror_id = ?",
        (mirror_id,),
    )
    return {path: (-1, -1, -1, -1) if retry else (size, mtime, inode, ctime) for path, size, mtime, inode, ctime,
            retry in rows}  # fmt: skip


def flagged_paths(conn: sqlite3.Connection, mirror_id: int, kinds: tuple[str, ...], file_id: int | None = None
                  ) -> set[str]:  # fmt: skip
    """Paths of the mirror's files (or of the one file_id) flagged with any of kinds."""
    marks = ",".join("?" * len(kinds))
    one = " AND f.id = ?" if file_id is not None else ""
    rows = conn.execute(f"SELECT DISTINCT f.path FROM flags fl JOIN files f ON f.id = fl.file_id "
                        f"WHERE fl.mirror_id = ? AND fl.kind IN ({marks}){one}",
                        (mirror_id, *kinds, *([file_id] if file_id is not None else [])))  # fmt: skip
    return {path for (path,) in rows}


def archive_at(conn: sqlite3.Connection, mirror_id: int, path: str) -> tuple[int, int] | None:
    """(archive id, file id) of the archive at path in the mirror, if it was read as one."""
    return conn.execute(
        "SELECT a.id, f.id FROM archives a JOIN files f ON f.id = a.file_id WHERE f.mirror_id = ? AND f.path = ?",
        (mirror_id, path),
    ).fetchone()


def member_paths(conn: sqlite3.Connection, archive_id: int) -> list[str]:
    return [r[0] for r in conn.execute("SELECT path FROM members WHERE archive_id = ?", (archive_id,))]


def archive_signatures(conn: sqlite3.Connection, mirror_name: str) -> dict[str, tuple[int, int, int, int]]:
    """path -> recorded signature of every file of the named mirror (empty for a mirror the catalog lacks)."""
    mirror_id = mirror_named(conn, mirror_name)
    return known_files(conn, mirror_id) if mirror_id is not None else {}


def recorded_archive_sizes(conn: sqlite3.Connection, mirror_names: list[str]) -> Iterator[int]:
    """Compressed sizes of the archives the catalog records for these mirrors."""
    marks = ",".join("?" * len(mirror_names))
    for (size,) in conn.execute(
        "SELECT f.size FROM files f JOIN archives a ON a.file_id = f.id JOIN mirrors m ON m.id = f.mirror_id "
        f"WHERE m.name IN ({marks}) ORDER BY f.size DESC",
        mirror_names,
    ):
        yield size
