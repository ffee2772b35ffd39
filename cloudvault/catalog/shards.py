"""Shard files: self-contained SQLite files that indexing workers fill with what they scanned (each archive's file
signature, scan outcome, frames, flags and members), and the reads that commit them into the catalog.

A worker never opens the catalog. A local `vault index` gives each archive its own shard; a Slurm task puts all
its archives in one, with `meta` naming the plan and task it was made for. Members of one archive are one run
of rowids in `members`, recorded on its `archives` row, so they are copied with a range scan.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import operator
import os
import sqlite3
from collections.abc import Iterable, Iterator

from cloudvault.catalog.rows import records_of
from cloudvault.models import FileStat, Flag, Frame, NestedArchive

MEMBER_COLUMNS = (
    "path, raw_path, type, size, mode, mtime, uid, gid, uname, gname, link_target, header_offset, data_offset, blake3, "
    "raw_link_target, sparse_map, pieces"
)
SHARD_SCHEMA = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE archives (idx INTEGER PRIMARY KEY, root TEXT NOT NULL, path TEXT NOT NULL, raw_path BLOB,
    kind TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,
    inode INTEGER NOT NULL, mode INTEGER NOT NULL, link_target TEXT,
    status TEXT NOT NULL, blake3 TEXT NOT NULL, pieces BLOB, raw_size INTEGER NOT NULL, member_count INTEGER NOT NULL,
    flag_counts TEXT NOT NULL, first_member INTEGER NOT NULL, last_member INTEGER NOT NULL,
    format TEXT NOT NULL DEFAULT 'tar.zst', seek_kind TEXT, seek_points BLOB);
CREATE TABLE frames (archive INTEGER NOT NULL, idx INTEGER NOT NULL, comp_offset INTEGER NOT NULL,
    comp_size INTEGER NOT NULL, raw_offset INTEGER NOT NULL, raw_size INTEGER NOT NULL);
CREATE TABLE flags (archive INTEGER NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL, member TEXT);
CREATE TABLE nested (archive INTEGER NOT NULL, raw_offset INTEGER NOT NULL, raw_size INTEGER NOT NULL,
    format TEXT NOT NULL, status TEXT NOT NULL, member_path TEXT NOT NULL, member_offset INTEGER NOT NULL);
CREATE TABLE members ({MEMBER_COLUMNS});
"""
SHARD_BATCH = 2000
ROWS_PER_INSERT = 500  # plain member rows bound by one INSERT (SQLite's variable limit permitting)
QUEUED_BATCHES = 8  # batches MemberRows holds for its thread: a slow disk holds the scan back
SHARD_INSERT = f"INSERT INTO members VALUES ({','.join('?' * 17)})"
STAT_FIELDS = "path, raw_path, kind, size, mtime_ns, ctime_ns, inode, mode, link_target"


def open_shard(path: str) -> sqlite3.Connection:
    """A fresh shard file inside an open transaction (no journal: a failed shard is thrown away whole); its member
    rows may be written by another thread (MemberRows), one at a time."""
    shard = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    shard.execute("PRAGMA journal_mode = OFF")
    shard.execute("PRAGMA synchronous = OFF")
    shard.executescript(SHARD_SCHEMA)
    shard.execute("BEGIN")
    return shard


def last_member(shard: sqlite3.Connection) -> int:
    """The highest member rowid so far: an archive's members start after it."""
    return shard.execute("SELECT coalesce(max(rowid), 0) FROM members").fetchone()[0]


def add_archive(shard: sqlite3.Connection, root: str, st: FileStat, scan, first: int) -> None:
    """The archive's row (where it was, its signature, what the scan found) after its members, whose rowids run
    from first to the last one now. (A hardlink's BLAKE3, its target's at that point, came with it from the scan.)"""
    last = last_member(shard)
    cur = shard.execute(
        f"INSERT INTO archives(root, {STAT_FIELDS}, status, blake3, pieces, raw_size, member_count, flag_counts, "
        "first_member, last_member, format, seek_kind, seek_points) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (root, *st, scan.status, scan.blake3, scan.pieces, scan.raw_size, scan.member_count,
         json.dumps(scan.flag_counts), first, last, scan.format, *(scan.seek_points or (None, None))),
    )  # fmt: skip
    idx = cur.lastrowid
    shard.executemany("INSERT INTO frames VALUES (?,?,?,?,?,?)", [(idx, i, *f) for i, f in enumerate(scan.frames)])
    shard.executemany("INSERT INTO flags VALUES (?,?,?,?)", [(idx, f.kind, f.detail, f.member) for f in scan.flags])
    shard.executemany("INSERT INTO nested VALUES (?,?,?,?,?,?,?)", [(idx, *n) for n in scan.nested])


def set_meta(shard: sqlite3.Connection, values: dict[str, object]) -> None:
    shard.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in values.items()])


SHARD_TABLES = ("archives", "frames", "flags", "members", "nested")


def table_digests(shard: sqlite3.Connection) -> dict[str, list]:
    """table -> [row count, sha256 of its rows in rowid order], for every table a shard holds: a shard that lost
    rows (a flag, so a secret goes unflagged) or had one changed no longer matches what its task recorded."""
    import hashlib

    found = {}
    for table in SHARD_TABLES:
        digest, count = hashlib.sha256(), 0
        for row in shard.execute(f"SELECT * FROM {table} ORDER BY rowid"):
            digest.update(repr(row).encode("utf-8", "surrogateescape"))
            count += 1
        found[table] = [count, digest.hexdigest()]
    return found


def finish_shard(shard: sqlite3.Connection, *, with_digests: bool = False) -> None:
    """Commit; with_digests (a shard another process merges later), its tables' counts and digests in meta."""
    if with_digests:
        set_meta(shard, {"tables": json.dumps(table_digests(shard))})
    shard.execute("COMMIT")


def digest_problem(shard: sqlite3.Connection, meta: dict[str, str]) -> str | None:
    """Which table of the shard does not match the counts and digest its task recorded (None: all match)."""
    try:
        recorded = json.loads(meta.get("tables") or "null")
    except ValueError:
        recorded = None
    if not isinstance(recorded, dict):
        return "it records no table counts and digests (made by an older vault, or damaged)"
    for table, (count, digest) in table_digests(shard).items():
        if recorded.get(table) != [count, digest]:
            was = recorded.get(table) or ["?"]
            return f"its {table} rows ({count}) do not match the {was[0]} and digest its task recorded"
    return None


def shard_scan(conn: sqlite3.Connection, alias: str, root: str, path: str) -> dict | None:
    """What the shard attached as alias recorded of one archive: status, blake3, raw_size, member_count,
    flag_counts, frames, flags, and the rowid range of its members; None when it holds no such archive."""
    row = conn.execute(
        f"SELECT idx, status, blake3, pieces, raw_size, member_count, flag_counts, first_member, last_member, "
        f"format, seek_kind, seek_points FROM {alias}.archives WHERE root = ? AND path = ?",
        (root, path),
    ).fetchone()
    if row is None:
        return None
    idx, status, digest, pieces, raw_size, count, counts, first, last, fmt, seek_kind, seek_points = row
    frames = records_of(Frame, conn.execute(
        f"SELECT comp_offset, comp_size, raw_offset, raw_size FROM {alias}.frames WHERE archive = ? ORDER BY idx",
        (idx,)))  # fmt: skip
    flags = records_of(Flag, conn.execute(
        f"SELECT kind, detail, member FROM {alias}.flags WHERE archive = ? ORDER BY rowid", (idx,)))  # fmt: skip
    nested = records_of(NestedArchive, conn.execute(
        f"SELECT raw_offset, raw_size, format, status, member_path, member_offset FROM {alias}.nested "
        "WHERE archive = ? ORDER BY raw_offset", (idx,)))  # fmt: skip
    return {"status": status, "blake3": digest, "pieces": pieces, "raw_size": raw_size, "member_count": count,
            "flag_counts": json.loads(counts), "frames": frames, "flags": flags, "rows": (first, last), "format": fmt,
            "seek_points": (seek_kind, seek_points) if seek_kind else None, "nested": nested}  # fmt: skip


def read_shard(path: str, *, check_digests: bool = False) -> tuple[dict[str, str], list[tuple]]:
    """A finished shard's meta and its archives as (root, FileStat, member_count, member rows found), read-only;
    check_digests: meta["digest_problem"] says which table no longer matches its recorded digest ("" if none)."""
    from pathlib import Path
    from urllib.parse import quote

    shard = sqlite3.connect(f"file:{quote(str(Path(path).absolute()))}?mode=ro", uri=True)
    try:
        meta = dict(shard.execute("SELECT key, value FROM meta"))
        if check_digests:
            meta["digest_problem"] = digest_problem(shard, meta) or ""
        archives = [
            (root, FileStat(*stat), count, shard.execute(
                "SELECT count(*) FROM members WHERE rowid BETWEEN ? AND ?", (first, last)).fetchone()[0])
            for root, *stat, count, first, last in shard.execute(
                f"SELECT root, {STAT_FIELDS}, member_count, first_member, last_member FROM archives ORDER BY idx")
        ]  # fmt: skip
    finally:
        shard.close()
    return meta, archives


def drop_members_from(shard: sqlite3.Connection, first: int) -> None:
    """Forget the members added from rowid first on (an archive that could not be read to its end)."""
    shard.execute("DELETE FROM members WHERE rowid >= ?", (first,))


def members_within(shard: sqlite3.Connection, first: int, raw_start: int, raw_end: int | None) -> list[str]:
    """Paths of the members from rowid first on whose header or data (a sparse member's expanded size: the
    stored bytes are no more) reaches into decoded bytes raw_start..raw_end (None: to the end)."""
    rows = shard.execute(
        "SELECT path FROM members WHERE rowid >= ? AND data_offset + size > ? AND header_offset < ? ORDER BY rowid",
        (first, raw_start, (1 << 63) - 1 if raw_end is None else raw_end),
    )
    return [path for (path,) in rows]


# Most members have no raw name, link, sparse map or piece hashes: a batch of only such is written with those
# columns as NULL literals, 12 values bound a row instead of 17 (half the cost of the batch's insert).
RARE_FIELDS = operator.itemgetter(1, 10, 14, 15, 16)  # raw_path, link_target, raw_link_target, sparse_map, pieces
NONE_RARE = (None,) * 5
PLAIN_FIELDS = operator.itemgetter(0, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13)
PLAIN_INSERT = "INSERT INTO members VALUES (?,NULL,?,?,?,?,?,?,?,?,NULL,?,?,?,NULL,NULL,NULL)"


def add_member_batch(shard: sqlite3.Connection, batch: list[tuple]) -> None:
    """A batch of member records into the shard: a batch of only plain ones as INSERTs of many rows each (one
    statement binds them all and steps once: a thread writing them lets the GIL go once a statement, not once a
    row, and SQLite parses no statement again), any other row by row."""
    if not all(map(NONE_RARE.__eq__, map(RARE_FIELDS, batch))):
        shard.executemany(SHARD_INSERT, batch)
        return
    rows = min(ROWS_PER_INSERT, shard.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // len(PLAIN_FIELDS(batch[0])))
    for at in range(0, len(batch), rows):
        part = batch[at : at + rows]
        shard.execute(_plain_inserts(len(part)), list(itertools.chain.from_iterable(map(PLAIN_FIELDS, part))))


@functools.lru_cache(maxsize=8)
def _plain_inserts(rows: int) -> str:
    return PLAIN_INSERT + ",(?,NULL,?,?,?,?,?,?,?,?,NULL,?,?,?,NULL,NULL,NULL)" * (rows - 1)


class MemberRows:
    """Member records written into a shard by a thread of its own, a batch at a time, while the caller goes on
    scanning (sqlite3 lets the GIL go while it steps: the rows cost the scanning thread a queue put a batch). An
    error of the writing thread is raised in the caller, at its next add or at close; the thread ends with the
    block (`with MemberRows(shard) as rows:`), whatever ends it. The shard is the thread's until then."""

    def __init__(self, shard: sqlite3.Connection) -> None:
        import queue
        import threading

        self._shard, self._error = shard, None
        self._queue: queue.Queue = queue.Queue(QUEUED_BATCHES)  # bounded: a slow disk holds the scan back
        self._thread = threading.Thread(target=self._write, name="shard-rows", daemon=True)

    def __enter__(self) -> MemberRows:
        self._thread.start()
        return self

    def _write(self) -> None:
        while (batch := self._queue.get()) is not None:
            if self._error is None:  # after an error the batches are only taken, so that the caller never waits
                try:
                    add_member_batch(self._shard, batch)
                except BaseException as exc:  # noqa: BLE001 (raised again in the caller's thread)
                    self._error = exc

    def add_all(self, records: Iterable[tuple]) -> None:
        """The records, in batches of SHARD_BATCH as they come."""
        it = iter(records)
        while batch := list(itertools.islice(it, SHARD_BATCH)):
            if self._error is not None:
                raise self._error
            self._queue.put(batch)

    def __exit__(self, kind, exc, tb) -> None:
        self._queue.put(None)
        self._thread.join()
        if kind is None and self._error is not None:
            raise self._error


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
