"""An archive intact as recorded and damaged (or changed in place) now: which of its recorded frames still decode,
and which recorded members the damage reaches.

The recorded frame table says where every frame was; each is decoded on its own from the archive as it is now,
so the frames after a damaged one are found again and their members stay readable. A member whose stored bytes
touch a damaged frame is read through the recorded table and hashed: one that still matches its recorded BLAKE3
(it ends before the damage) stays readable; the others are flagged `damaged_member`, naming the frame and its
compressed offset, and every read path refuses them (catalog.flagged.refusal).
"""

from __future__ import annotations

from functools import partial

import blake3

from cloudvault.archive import sparse
from cloudvault.archive.framecheck import frame_damage
from cloudvault.archive.reader import ArchiveReader
from cloudvault.catalog.generations import Recorded
from cloudvault.catalog.integrity import hashed_members
from cloudvault.catalog.lookup import frame_table
from cloudvault.errors import IntegrityError
from cloudvault.models import FileStat, Flag, Frame, Member
from cloudvault.tools.mirrorfs import LocalMirror


def damage_flags(conn, mirror: LocalMirror, st: FileStat, old: Recorded) -> list[Flag]:
    """damaged_frame flags (one per frame that no longer decodes) and damaged_member flags (one per recorded
    member those frames cost); none when every recorded frame still decodes."""
    frames = frame_table(conn, old.archive_id)
    with mirror.open(st.path, st.raw_path) as fh:
        bad = frame_damage(fh, frames, st.size)
    if not bad:
        return []
    flags = [Flag("damaged_frame", f"frame {i} at compressed offset {frames[i].comp_offset}: {why}")
             for i, why in sorted(bad.items())]  # fmt: skip
    opener = partial(mirror.open, st.path, st.raw_path)
    for member in hashed_members(conn, old.archive_id):
        hit = [i for i in bad if _touches(member, frames[i])]
        if hit and _digest(opener, frames, member) != member.blake3:
            i = hit[0]
            where = f"in frame {i} at compressed offset {frames[i].comp_offset}"
            flags.append(Flag("damaged_member", f"{where} ({bad[i]}): its bytes no longer match", member.path))
    return flags


def _stored_size(member: Member) -> int:
    return sparse.stored_size(sparse.decode_map(member.sparse_map)) if member.sparse_map else member.size


def _touches(member: Member, frame: Frame) -> bool:
    end = member.data_offset + _stored_size(member)
    return member.data_offset < frame.raw_offset + frame.raw_size and end > frame.raw_offset


def _digest(opener, frames: list[Frame], member: Member) -> str | None:
    """BLAKE3 of the member's bytes read through the recorded frame table now; None when they cannot be read."""
    reader = ArchiveReader(opener, frames)
    h = blake3.blake3()
    try:
        stored = reader.chunks(member.data_offset, _stored_size(member))
        pieces = sparse.decode_map(member.sparse_map) if member.sparse_map else None
        for chunk in sparse.expand(stored, pieces, member.size) if pieces else stored:
            h.update(chunk)
    except (IntegrityError, OSError):
        return None
    finally:
        reader.close()
    return h.hexdigest()
