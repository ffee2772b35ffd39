"""Browsing one entry: its details for `vault show`, its files and members for `vault ls`."""

from __future__ import annotations

import sqlite3

from cloudvault.catalog.flagged import one_block_xz
from cloudvault.catalog.query import Hit
from cloudvault.record import record

EntryFlag = record("EntryFlag", "kind path member detail")  # a flag of one of the entry's files

# The fields of EntryDetails. key_files and flags (EntryFlag) are tuples, settings a dict; archive_formats: archives
# by the format the index recorded (archive/formats.py's names); one_block_xz: large xz archives of one block (path ->
# decompressed bytes), read from their start; restores and runs: catalog.records' Restore (detail parsed) and Run
# (summary parsed), tuples of them.
_DETAILS = ("mirror entry what node_gpu measured size_text key_files caution settings present files archives "
            "archive_formats members bytes_on_disk environment flags one_block_xz restores runs")  # fmt: skip


class EntryDetails(record("EntryDetails", _DETAILS)):
    """One entry as `vault show` tells it. (A record, models.record: a typing.NamedTuple compiles each field's
    annotation at import, and dataclasses cost more: ~1 ms and ~5 ms of every `vault show` and `vault ls`.)"""

    __slots__ = ()

    def to_json(self) -> dict:
        return self._asdict() | {"key_files": list(self.key_files), "flags": [f._asdict() for f in self.flags],
                                 "restores": [r._asdict() for r in self.restores],
                                 "runs": [r._asdict() for r in self.runs]}  # fmt: skip


def entry_details(conn: sqlite3.Connection, mirror_id: int, entry_id: str) -> EntryDetails:
    import json  # here, with records (the writers of restores and runs): `vault ls` loads neither

    from cloudvault.catalog import records

    row = conn.execute(
        "SELECT m.name, e.what, e.node_gpu, e.measured, e.size_text, e.key_files, e.caution, e.settings, e.present "
        "FROM entries e JOIN mirrors m ON m.id = e.mirror_id WHERE e.mirror_id = ? AND e.entry_id = ?",
        (mirror_id, entry_id),
    ).fetchone()
    files, size = conn.execute(
        "SELECT count(*), coalesce(sum(size), 0) FROM files WHERE mirror_id = ? AND entry_id = ?", (mirror_id, entry_id)
    ).fetchone()
    formats = conn.execute(
        "SELECT a.format, count(*), coalesce(sum(a.member_count), 0) FROM archives a JOIN files f ON f.id = a.file_id "
        "WHERE f.mirror_id = ? AND f.entry_id = ? GROUP BY a.format ORDER BY count(*) DESC, a.format",
        (mirror_id, entry_id),
    ).fetchall()
    archives, members = sum(n for _, n, _ in formats), sum(m for _, _, m in formats)
    env = conn.execute(
        "SELECT d.body FROM docs d JOIN files f ON f.id = d.file_id WHERE f.mirror_id = ? AND f.path = ?",
        (mirror_id, f"{entry_id}/ENVIRONMENT.md"),
    ).fetchone()
    flags = tuple(
        EntryFlag(k, p, mem, d)
        for k, p, mem, d in conn.execute(
            "SELECT fl.kind, f.path, fl.member, fl.detail FROM flags fl LEFT JOIN files f ON f.id = fl.file_id "
            "WHERE fl.mirror_id = ? AND fl.entry_id = ? ORDER BY fl.kind, f.path, fl.member",
            (mirror_id, entry_id),
        )
    )
    name, what, node, measured, size_text, key_files, caution, settings, present = row
    file_ids = tuple(file_id for (file_id,) in conn.execute(
        "SELECT id FROM files WHERE mirror_id = ? AND entry_id = ? AND id IN (SELECT file_id FROM flags WHERE "
        "kind = 'xz_one_block')", (mirror_id, entry_id)))  # fmt: skip
    return EntryDetails(
        mirror=name, entry=entry_id, what=what, node_gpu=node, measured=measured, size_text=size_text,
        key_files=tuple(k for k in key_files.split("; ") if k), caution=caution, settings=json.loads(settings),
        present=bool(present), files=files, archives=archives, archive_formats={fmt: n for fmt, n, _ in formats},
        members=members, bytes_on_disk=size,
        environment=env[0] if env else None, flags=flags,
        one_block_xz=one_block_xz(conn, file_ids) if file_ids else {},
        restores=tuple(r._replace(detail=json.loads(r.detail)) for r in records.restores(conn, mirror_id=mirror_id,
                                                                                         entry_id=entry_id)),
        runs=tuple(r._replace(summary=json.loads(r.summary)) for r in records.runs(conn, mirror_id=mirror_id,
                                                                                   entry_id=entry_id)),
    )  # fmt: skip


# -- listing ----------------------------------------------------------------------------------------------------
def list_entry(conn: sqlite3.Connection, mirror_id: int, entry_id: str, pattern: str | None) -> list[Hit]:
    """Files of an entry (paths relative to the entry) and members of its archives, matching a glob."""
    name = conn.execute("SELECT name FROM mirrors WHERE id = ?", (mirror_id,)).fetchone()[0]
    prefix = f"{entry_id}/" if entry_id else ""
    glob = pattern or "*"
    hits = [
        Hit("file", entry_id, path[len(prefix) :], None, size, digest, name, kind)
        for path, size, digest, kind in conn.execute(
            "SELECT path, size, blake3, kind FROM files WHERE mirror_id = ? AND entry_id = ? "
            "AND substr(path, ?) GLOB ? ORDER BY path",
            (mirror_id, entry_id, len(prefix) + 1, glob),
        )
    ]
    hits += [
        Hit("member", entry_id, path, archive, size, digest, name, mtype)
        for path, archive, size, digest, mtype in conn.execute(
            "SELECT mb.path, f.path, mb.size, mb.blake3, mb.type FROM members mb "
            "JOIN archives a ON a.id = mb.archive_id JOIN files f ON f.id = a.file_id "
            "WHERE f.mirror_id = ? AND f.entry_id = ? AND mb.path GLOB ? ORDER BY f.path, mb.data_offset",
            (mirror_id, entry_id, glob),
        )
    ]
    return hits
