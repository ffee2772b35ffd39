"""Writes to the catalog: mirrors, entries, files, archives with their members, flags, seekable copies; and the
members indexing workers add to shard files (their format: catalog/shards.py).

Callers own transactions, except record_copy, which is one."""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from cloudvault.catalog import shards
from cloudvault.catalog.db import transaction
from cloudvault.models import Entry, FileStat, Flag, Frame

SHARD_BATCH = 2000
RETRY_KINDS = ("unreadable", "changed_while_indexing")  # files read again on the next run whatever their stat


def add_shard_members(shard: sqlite3.Connection, records: Iterable[tuple]) -> None:
    """Member records (in shards.MEMBER_COLUMNS order) into the shard, in batches as they come."""
    it = iter(records)
    while batch := list(itertools.islice(it, SHARD_BATCH)):
        shard.executemany(shards.SHARD_INSERT, batch)


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


def insert_archive(conn: sqlite3.Connection, file_id: int, scan, shard_alias: str, rows: tuple[int, int]) -> int:
    """The archive row, its frame table, and its members (rows: their rowid range) copied from an attached shard;
    scan is what the archive scan found (status, raw_size, member_count, frames: see archive.scan.ScanResult)."""
    cur = conn.execute(
        "INSERT INTO archives(file_id, status, raw_size, member_count, frame_count) VALUES (?,?,?,?,?)",
        (file_id, scan.status, scan.raw_size, scan.member_count, len(scan.frames)),
    )
    archive_id = cur.lastrowid
    conn.executemany(
        "INSERT INTO frames(archive_id, idx, comp_offset, comp_size, raw_offset, raw_size) VALUES (?,?,?,?,?,?)",
        [(archive_id, i, f.comp_offset, f.comp_size, f.raw_offset, f.raw_size) for i, f in enumerate(scan.frames)],
    )
    shards.insert_members(conn, archive_id, shard_alias, rows)
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
