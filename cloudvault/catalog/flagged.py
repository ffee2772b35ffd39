"""Which files and archive members were flagged: holding a secret (never staged or copied by repro), or changed in
place or damaged since they were recorded (no read path hands out their bytes)."""

from __future__ import annotations

import sqlite3


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


def refusal(conn: sqlite3.Connection, member) -> str | None:
    """Why no byte of member (a Member: a plain file, or an archive member whose own bytes are stored) may be
    handed out: a plain file changed in place since it was recorded, or a member a damaged frame took."""
    kind, which = ("changed_in_place", None) if member.archive is None else ("damaged_member", member.path)
    row = conn.execute(
        "SELECT detail FROM flags WHERE file_id = ? AND kind = ? AND member IS ? LIMIT 1", (member.file_id, kind, which)
    ).fetchone()
    return f"{kind.replace('_', ' ')}: {row[0]}" if row else None
