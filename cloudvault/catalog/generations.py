"""The generations, file_history, member_history and generation_events tables: each `vault index` run numbered and
kept, the versions it replaced or saw removed, and what it found changed in place or damaged. Callers own
transactions.

A files row belongs to the generation that recorded its content; a row whose content is read again unchanged
keeps its generation, so no unchanged row is ever copied. A version replaced or removed moves to file_history
(an archive's members to member_history) with the generation that replaced it: what a generation G held of a
mirror is the files rows of generation <= G and the history rows recorded at or before G and replaced after it.
"""

from __future__ import annotations

import json
import sqlite3
from collections import namedtuple
from dataclasses import dataclass
from datetime import UTC, datetime

from cloudvault.catalog.rows import record_of, records_of

COUNTS = ("seen", "read", "added", "modified", "removed", "changed_in_place", "newly_damaged")
Counts = namedtuple("Counts", COUNTS)  # what one index run counted

Recorded = namedtuple("Recorded", "file_id kind size mtime_ns link_target blake3 generation archive_id status")
# one version of a path as a generation held it: history_id None for the files row (still current)
Held = namedtuple("Held", "path kind blake3 generation file_id history_id archive")
HeldIn = namedtuple("HeldIn", ("mirror_id", *Held._fields))  # a Held with its mirror, as the SELECT reads it


@dataclass(frozen=True)
class Generation:
    """One index run: when, which mirrors, and what it counted."""

    number: int
    started_at: str
    finished_at: str | None
    mirrors: tuple[str, ...]
    counts: Counts

    def to_json(self) -> dict:
        return {"generation": self.number, "started_at": self.started_at, "finished_at": self.finished_at,
                "mirrors": list(self.mirrors), **self.counts._asdict()}  # fmt: skip


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def begin(conn: sqlite3.Connection, mirrors: list[str]) -> int:
    """A new generation, numbered after the last one."""
    cur = conn.execute("INSERT INTO generations(started_at, mirrors) VALUES (?, ?)", (_now(), json.dumps(mirrors)))
    return cur.lastrowid


def finish(conn: sqlite3.Connection, number: int, mirrors: list[str], counts: dict[str, int]) -> None:
    sets = ", ".join(f"{name} = ?" for name in COUNTS)
    conn.execute(
        f"UPDATE generations SET finished_at = ?, mirrors = ?, {sets} WHERE id = ?",
        (_now(), json.dumps(mirrors), *(counts.get(name, 0) for name in COUNTS), number),
    )


def _generation(row: sqlite3.Row | tuple) -> Generation:
    number, started, finished, mirrors, *counts = row
    return Generation(number, started, finished, tuple(json.loads(mirrors)), Counts(*counts))


def all_generations(conn: sqlite3.Connection) -> list[Generation]:
    sql = f"SELECT id, started_at, finished_at, mirrors, {', '.join(COUNTS)} FROM generations ORDER BY id"
    return [_generation(r) for r in conn.execute(sql)]


def generation_numbers(conn: sqlite3.Connection) -> list[int]:
    return [n for (n,) in conn.execute("SELECT id FROM generations ORDER BY id")]


# -- what one run writes -----------------------------------------------------------------------------------------
def recorded(conn: sqlite3.Connection, mirror_id: int | None, path: str) -> Recorded | None:
    """The version of path the catalog holds now, as the reference a new read is compared with."""
    if mirror_id is None:
        return None
    return record_of(Recorded, conn.execute(
        "SELECT f.id AS file_id, f.kind, f.size, f.mtime_ns, f.link_target, f.blake3, f.generation, "
        "a.id AS archive_id, a.status FROM files f LEFT JOIN archives a ON a.file_id = f.id "
        "WHERE f.mirror_id = ? AND f.path = ?",
        (mirror_id, path),
    ))  # fmt: skip


def stamp(conn: sqlite3.Connection, file_id: int, generation: int) -> None:
    conn.execute("UPDATE files SET generation = ? WHERE id = ?", (generation, file_id))


def retire(conn: sqlite3.Connection, file_id: int, replaced_in: int) -> None:
    """The files row (an archive's members with it) copied into history as replaced by generation replaced_in;
    the caller then deletes or replaces the row."""
    cur = conn.execute(
        "INSERT INTO file_history(mirror_id, path, kind, size, mtime_ns, link_target, blake3, generation, "
        "replaced_in, archive) SELECT mirror_id, path, kind, size, mtime_ns, link_target, blake3, generation, ?, "
        "EXISTS (SELECT 1 FROM archives a WHERE a.file_id = f.id) FROM files f WHERE f.id = ?",
        (replaced_in, file_id),
    )
    conn.execute(
        "INSERT INTO member_history(history_id, path, type, size, blake3) SELECT ?, mb.path, mb.type, mb.size, "
        "mb.blake3 FROM members mb JOIN archives a ON a.id = mb.archive_id WHERE a.file_id = ? ORDER BY mb.id",
        (cur.lastrowid, file_id),
    )


def retire_paths(conn: sqlite3.Connection, mirror_id: int, paths: list[str], replaced_in: int) -> None:
    """Files about to be deleted (gone from the mirror) into history."""
    for path in paths:
        row = conn.execute("SELECT id FROM files WHERE mirror_id = ? AND path = ?", (mirror_id, path)).fetchone()
        if row:
            retire(conn, row[0], replaced_in)


def keep_signature(conn: sqlite3.Connection, file_id: int, st) -> None:
    """A row kept as the reference takes the file's stat as walked, so an unchanged file is not read again; a copy
    put back (a new ctime) is."""
    conn.execute(
        "UPDATE files SET size = ?, mtime_ns = ?, ctime_ns = ?, inode = ? WHERE id = ?",
        (st.size, st.mtime_ns, st.ctime_ns, st.inode, file_id),
    )


def members_changed(conn: sqlite3.Connection, alias: str, rows: tuple[int, int], archive_id: int) -> list[tuple]:
    """(path, recorded BLAKE3, BLAKE3 now) of the recorded file members that the new scan (its shard records, the
    rowid range rows of the attached shard alias) found at the same data offset with other bytes."""
    return conn.execute(
        f"SELECT mb.path, mb.blake3, s.blake3 FROM members mb JOIN {alias}.members s ON s.rowid BETWEEN ? AND ? "
        "AND s.data_offset = mb.data_offset WHERE mb.archive_id = ? AND mb.type = 'file' AND s.blake3 != mb.blake3 "
        "ORDER BY mb.data_offset",
        (*rows, archive_id),
    ).fetchall()


def note(conn: sqlite3.Connection, generation: int, mirror_id: int, path: str, kind: str,
         expected: str | None, found: str | None) -> None:  # fmt: skip
    """An event of the run that is not a new version: changed_in_place, damaged."""
    conn.execute(
        "INSERT INTO generation_events(generation, mirror_id, path, kind, expected, found) VALUES (?,?,?,?,?,?)",
        (generation, mirror_id, path, kind, expected, found),
    )


# -- what a generation held ----------------------------------------------------------------------------------------
def held(conn: sqlite3.Connection, generation: int) -> dict[tuple[int, str], Held]:
    """(mirror id, path) -> the version generation held, of every mirror."""
    found: dict[tuple[int, str], Held] = {}
    current = conn.execute(
        "SELECT f.mirror_id, f.path, f.kind, f.blake3, f.generation, f.id AS file_id, NULL AS history_id, "
        "a.id IS NOT NULL AS archive FROM files f LEFT JOIN archives a ON a.file_id = f.id WHERE f.generation <= ?",
        (generation,),
    )
    for version in records_of(HeldIn, current):
        found[(version.mirror_id, version.path)] = Held(*version[1:])
    replaced = conn.execute(
        "SELECT mirror_id, path, kind, blake3, generation, NULL AS file_id, id AS history_id, archive "
        "FROM file_history WHERE generation <= ? AND replaced_in > ?",
        (generation, generation),
    )
    for version in records_of(HeldIn, replaced):
        found[(version.mirror_id, version.path)] = Held(*version[1:])
    return found


def members_held(conn: sqlite3.Connection, version: Held) -> dict[str, tuple[str, str | None]]:
    """member path -> (type, BLAKE3) of an archive version (the last member of a path wins, as tar extracts)."""
    if version.history_id is not None:
        rows = conn.execute("SELECT path, type, blake3 FROM member_history WHERE history_id = ? ORDER BY rowid",
                            (version.history_id,))  # fmt: skip
    else:
        rows = conn.execute(
            "SELECT mb.path, mb.type, mb.blake3 FROM members mb JOIN archives a ON a.id = mb.archive_id "
            "WHERE a.file_id = ? ORDER BY mb.id",
            (version.file_id,),
        )
    return {path: (kind, digest) for path, kind, digest in rows}


def events_between(conn: sqlite3.Connection, after: int, upto: int) -> list[tuple[int, str, str]]:
    """(mirror id, path, kind) of the events of the generations after `after` up to `upto`."""
    return conn.execute(
        "SELECT DISTINCT mirror_id, path, kind FROM generation_events WHERE generation > ? AND generation <= ? "
        "ORDER BY path",
        (after, upto),
    ).fetchall()


def mirror_names(conn: sqlite3.Connection) -> dict[int, str]:
    return dict(conn.execute("SELECT id, name FROM mirrors"))
