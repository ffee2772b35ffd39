"""Writes to the catalog: mirrors, entries, files, archives with their members, flags, seekable copies; and the
shard files that indexing workers fill with one archive's members.

Callers own transactions, except record_copy, which is one."""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from cloudvault.catalog.db import transaction
from cloudvault.models import Entry, FileStat, Flag, Frame

MEMBER_COLUMNS = (
    "path, raw_path, type, size, mode, mtime, uid, gid, uname, gname, link_target, header_offset, data_offset, blake3"
)
# An indexing worker writes an archive's members to a shard file of this shape; the parent copies them over.
SHARD_SCHEMA = f"CREATE TABLE members ({MEMBER_COLUMNS})"
SHARD_INSERT = f"INSERT INTO members VALUES ({','.join('?' * 14)})"
SHARD_BATCH = 2000
RETRY_KINDS = ("unreadable", "changed_while_indexing")  # files read again on the next run whatever their stat


def open_shard(path: str) -> sqlite3.Connection:
    """A fresh shard file for one archive's members, inside an open transaction (no journal: a failed shard is
    thrown away whole)."""
    shard = sqlite3.connect(path, isolation_level=None)
    shard.execute("PRAGMA journal_mode = OFF")
    shard.execute("PRAGMA synchronous = OFF")
    shard.execute(SHARD_SCHEMA)
    shard.execute("BEGIN")
    return shard


def add_shard_members(shard: sqlite3.Connection, records: Iterable[tuple]) -> None:
    """Member records (in MEMBER_COLUMNS order) into the shard, in batches as they come."""
    it = iter(records)
    while batch := list(itertools.islice(it, SHARD_BATCH)):
        shard.executemany(SHARD_INSERT, batch)


def finish_shard(shard: sqlite3.Connection) -> None:
    """Commit the shard, each hardlink member first given its target's BLAKE3 (extracting it yields the
    target's data)."""
    if shard.execute("SELECT 1 FROM members WHERE type = 'hardlink' LIMIT 1").fetchone():
        shard.execute("CREATE INDEX members_path ON members(path)")
        shard.execute(
            "UPDATE members SET blake3 = (SELECT t.blake3 FROM members t WHERE t.path = members.link_target "
            "AND t.type = 'file') WHERE type = 'hardlink'"
        )
    shard.execute("COMMIT")


@contextlib.contextmanager
def attached_shard(conn: sqlite3.Connection, path: str, alias: str = "shard") -> Iterator[str | None]:
    """The shard file attached to the catalog connection under alias (None when the worker left no file)."""
    if not os.path.exists(path):
        yield None
        return
    conn.execute("ATTACH DATABASE ? AS " + alias, (path,))
    try:
        yield alias
    finally:
        conn.execute("DETACH DATABASE " + alias)


def upsert_mirror(conn: sqlite3.Connection, name: str, root: str, manifest: str | None) -> int:
    conn.execute(
        "INSERT INTO mirrors(name, root, manifest) VALUES (?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET root = excluded.root, manifest = excluded.manifest",
        (name, root, manifest),
    )
    return conn.execute("SELECT id FROM mirrors WHERE name = ?", (name,)).fetchone()[0]


def mark_indexed(conn: sqlite3.Connection, mirror_id: int) -> None:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    conn.execute("UPDATE mirrors SET indexed_at = ? WHERE id = ?", (now, mirror_id))


def upsert_entries(conn: sqlite3.Connection, mirror_id: int, entries: Iterable[tuple[Entry, bool]]) -> None:
    """Entries with their manifest metadata; only rows whose values changed are rewritten (FTS stays small)."""
    for entry, present in entries:
        values = (
            entry.what,
            entry.node_gpu,
            entry.measured,
            entry.size_text,
            "; ".join(entry.key_files),
            entry.caution,
            entry.settings_json,
            int(present),
        )
        row = conn.execute(
            "SELECT what, node_gpu, measured, size_text, key_files, caution, settings, present FROM entries "
            "WHERE mirror_id = ? AND entry_id = ?",
            (mirror_id, entry.entry_id),
        ).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO entries(mirror_id, entry_id, what, node_gpu, measured, size_text, key_files, caution,"
                " settings, present) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (mirror_id, entry.entry_id, *values),
            )
        elif tuple(row) != values:
            conn.execute(
                "UPDATE entries SET what=?, node_gpu=?, measured=?, size_text=?, key_files=?, caution=?, settings=?,"
                " present=? WHERE mirror_id = ? AND entry_id = ?",
                (*values, mirror_id, entry.entry_id),
            )


def delete_files(conn: sqlite3.Connection, mirror_id: int, paths: Iterable[str]) -> None:
    conn.executemany("DELETE FROM files WHERE mirror_id = ? AND path = ?", [(mirror_id, p) for p in paths])


def insert_file(conn: sqlite3.Connection, mirror_id: int, entry_id: str, st: FileStat, digest: str | None) -> int:
    conn.execute("DELETE FROM files WHERE mirror_id = ? AND path = ?", (mirror_id, st.path))
    cur = conn.execute(
        "INSERT INTO files(mirror_id, entry_id, path, raw_path, kind, size, mtime_ns, ctime_ns, inode, mode,"
        " link_target, blake3) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
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


def insert_archive(conn: sqlite3.Connection, file_id: int, scan, shard_alias: str) -> int:
    """The archive row, its frame table, and its members copied from an attached shard database; scan is what
    the archive scan found (status, raw_size, member_count, frames: see cloudvault.archive.scan.ScanResult)."""
    cur = conn.execute(
        "INSERT INTO archives(file_id, status, raw_size, member_count, frame_count) VALUES (?,?,?,?,?)",
        (file_id, scan.status, scan.raw_size, scan.member_count, len(scan.frames)),
    )
    archive_id = cur.lastrowid
    conn.executemany(
        "INSERT INTO frames(archive_id, idx, comp_offset, comp_size, raw_offset, raw_size) VALUES (?,?,?,?,?,?)",
        [(archive_id, i, f.comp_offset, f.comp_size, f.raw_offset, f.raw_size) for i, f in enumerate(scan.frames)],
    )
    conn.execute(
        f"INSERT INTO members(archive_id, {MEMBER_COLUMNS}) SELECT ?, {MEMBER_COLUMNS} FROM {shard_alias}.members",
        (archive_id,),
    )
    return archive_id


def clear_flags(conn: sqlite3.Connection, mirror_id: int, kind: str, file_id: int | None = None) -> None:
    """Drop flags of a kind that a step is about to re-check: the mirror's, or one file's."""
    if file_id is None:
        conn.execute("DELETE FROM flags WHERE mirror_id = ? AND kind = ?", (mirror_id, kind))
    else:
        conn.execute("DELETE FROM flags WHERE file_id = ? AND kind = ?", (file_id, kind))


def set_list_status(conn: sqlite3.Connection, archive_id: int, status: str | None) -> None:
    conn.execute("UPDATE archives SET list_status = ? WHERE id = ?", (status, archive_id))


def record_copy(conn: sqlite3.Connection, archive_id: int, tmp: Path, final: Path, frames: list[Frame]) -> None:
    """Rename the copy into place and record it with its frame table, in one transaction."""
    with transaction(conn):
        insert_copy(conn, archive_id, tmp, final, frames)


def insert_copy(conn: sqlite3.Connection, archive_id: int, tmp: Path, final: Path, frames: list[Frame]) -> None:
    """The copy's rows, inside the caller's transaction; the file is renamed into place last."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    conn.execute("DELETE FROM seekable WHERE archive_id = ?", (archive_id,))
    conn.execute(
        "INSERT INTO seekable(archive_id, path, comp_size, frame_count, created_at) VALUES (?,?,?,?,?)",
        (archive_id, str(final), tmp.stat().st_size, len(frames), now),
    )
    conn.executemany(
        "INSERT INTO seekable_frames(archive_id, idx, comp_offset, comp_size, raw_offset, raw_size) "
        "VALUES (?,?,?,?,?,?)",
        [(archive_id, i, f.comp_offset, f.comp_size, f.raw_offset, f.raw_size) for i, f in enumerate(frames)],
    )
    os.replace(tmp, final)
