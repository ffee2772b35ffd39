"""Which files and archive members were flagged: holding a secret (never staged or copied by repro), or changed in
place or damaged since they were recorded (no read path hands out their bytes)."""

from __future__ import annotations

import sqlite3

from cloudvault.record import record


def secret_holders(conn: sqlite3.Connection, mirror_id: int, entry_id: str) -> set[tuple[int, str | None]]:
    """(file id, member path or None for the plain file itself) of everything flagged 'secret' in the entry."""
    rows = conn.execute(
        "SELECT file_id, member FROM flags WHERE mirror_id = ? AND entry_id = ? AND kind = 'secret'",
        (mirror_id, entry_id),
    )
    return {(file_id, member) for file_id, member in rows}


def secret_flags(conn: sqlite3.Connection, targets) -> list[tuple[str, str]]:
    """(member label, flag detail) of each target flagged 'secret': a plain file is flagged with member NULL."""
    found = []
    for t in targets:
        member = t.path if t.archive else None
        rows = conn.execute(
            "SELECT detail FROM flags WHERE file_id = ? AND kind = 'secret' AND member IS ?", (t.file_id, member)
        ).fetchall()
        found += [(t.label, detail) for (detail,) in rows]
    return found


# One flag of the catalog, where it is and why: `archive` is its file's path when that file is an archive.
Flag = record("Flag", "entry path archive member kind detail")


def all_flags(conn: sqlite3.Connection, kind: str | None = None) -> list[Flag]:
    """Every flag of the catalog (or of one kind), by entry and path: where it is, its kind and detail (never a
    value: flags hold none)."""
    sql = ("SELECT fl.entry_id AS entry, f.path AS file, a.id IS NOT NULL AS is_archive, fl.member AS member, "
           "fl.kind AS kind, fl.detail AS detail FROM flags fl LEFT JOIN files f ON f.id = fl.file_id "
           "LEFT JOIN archives a ON a.file_id = f.id" + (" WHERE fl.kind = ?" if kind else "") +
           " ORDER BY fl.entry_id, f.path, fl.member, fl.kind")  # fmt: skip
    cursor = conn.execute(sql, (kind,) if kind else ())
    names = [d[0] for d in cursor.description]
    flags = []
    for row in cursor:
        flag = dict(zip(names, row, strict=True))
        flags.append(Flag(flag["entry"], flag["file"], flag["file"] if flag["is_archive"] else None, flag["member"],
                          flag["kind"], flag["detail"]))  # fmt: skip
    return flags


def searched_documents(conn: sqlite3.Connection, scope: tuple[int, str] | None) -> int:
    """How many documents' text `vault search` reads (the rest of the mirror it knows by name)."""
    sql = "SELECT count(*) FROM docs d JOIN files f ON f.id = d.file_id"
    if scope is None:
        return conn.execute(sql).fetchone()[0]
    return conn.execute(sql + " WHERE f.mirror_id = ? AND f.entry_id = ?", scope).fetchone()[0]


def secret_rules_in(conn: sqlite3.Connection, file_ids: tuple[int, ...]) -> dict[tuple[int, str | None], set[str]]:
    """(file id, member or None) -> the secret rules the index flagged in it (the first word of each detail)."""
    marks = ", ".join("?" * len(file_ids))
    sql = f"SELECT file_id, member, detail FROM flags WHERE kind = 'secret' AND file_id IN ({marks})"
    found: dict[tuple[int, str | None], set[str]] = {}
    for file_id, member, detail in conn.execute(sql, file_ids):
        found.setdefault((file_id, member), set()).add(detail.split(" ", 1)[0])
    return found


# a zip member whose own records disagree (which bytes does the mirror hold?), whose data does not check out, or
# which vault does not read (encrypted, or in a compression method it has no decoder for)
ZIP_REFUSED = ("bad_crc", "bad_size", "corrupt_data", "unsupported_method", "zip_no_local_header",
               "zip_header_mismatch", "zip_overlap", "encrypted_member")  # fmt: skip


def refuses_any(conn: sqlite3.Connection, file_id: int) -> bool:
    """Whether refusal may refuse anything of the file: it (a plain file) changed in place, a damaged frame
    took some of its members, or a zip member is flagged one of ZIP_REFUSED. One query per archive, so a reader
    of 200,000 members asks once, not per member."""
    kinds = ("changed_in_place", "damaged_member", *ZIP_REFUSED)
    sql = f"SELECT 1 FROM flags WHERE file_id = ? AND kind IN ({','.join('?' * len(kinds))}) LIMIT 1"
    return conn.execute(sql, (file_id, *kinds)).fetchone() is not None


def refusal(conn: sqlite3.Connection, member) -> str | None:
    """Why no byte of member (a Member: a plain file, or an archive member whose own bytes are stored) may be
    handed out: a plain file changed in place since it was recorded, a member a damaged frame took, or a zip
    member flagged one of ZIP_REFUSED."""
    kinds = ("changed_in_place",) if member.archive is None else ("damaged_member", *ZIP_REFUSED)
    which = None if member.archive is None else member.path
    marks = ",".join("?" * len(kinds))
    row = conn.execute(f"SELECT kind, detail FROM flags WHERE file_id = ? AND kind IN ({marks}) AND member IS ? "
                       "LIMIT 1", (member.file_id, *kinds, which)).fetchone()  # fmt: skip
    return f"{row[0].replace('_', ' ')}: {row[1]}" if row else None


# past this many decompressed bytes, reading a member of a one-block xz says why it is slow: xz decodes 50-150 MB/s
# on one core (53-70 MB/s measured on source files on a shared 2-core machine), so reaching the end of 64 MiB costs
# 0.5-1.3 s; below it a wait goes unnoticed, past it each member read pays for everything before it
ONE_BLOCK_NOTE = 64 << 20


def one_block_xz(conn: sqlite3.Connection, file_ids: tuple[int, ...], over: int = ONE_BLOCK_NOTE) -> dict[str, int]:
    """Path -> decompressed bytes of each archive of file_ids flagged xz_one_block (a member of it is decoded from
    the archive's start) holding more than over bytes."""
    marks = ",".join("?" * len(file_ids))
    rows = conn.execute(
        "SELECT f.path, a.raw_size FROM flags fl JOIN files f ON f.id = fl.file_id JOIN archives a ON a.file_id = f.id "
        f"WHERE fl.kind = 'xz_one_block' AND fl.member IS NULL AND a.raw_size > ? AND f.id IN ({marks}) "
        "ORDER BY f.path", (over, *file_ids))  # fmt: skip
    return {path: raw_size for path, raw_size in rows}


def salvaged(conn: sqlite3.Connection, file_id: int) -> bool:
    """Whether the archive, damaged when first indexed, was read past its damaged frames (the index found the
    frames after them again): then each member a damaged frame reaches is flagged damaged_member, and the others
    are as readable as any."""
    row = conn.execute(
        "SELECT 1 FROM archives a WHERE a.file_id = ? AND a.status = 'corrupt_frame' AND EXISTS (SELECT 1 FROM flags "
        "WHERE file_id = a.file_id AND kind = 'damaged_frame' AND member IS NULL)",
        (file_id,),
    ).fetchone()
    return row is not None
