"""What a re-read file is against the version the catalog recorded, and what the run writes for it.

A new path is `added`. The same bytes are the `same` version (its row keeps its generation). Other bytes with
another size or mtime are `modified`: a new version, the old one kept as history. Other bytes with the same size
and mtime are `changed_in_place`: bit rot or a corrupted copy synced over, not an update, so the recorded hash
stays the reference and the file is flagged until `vault index --accept PATH` takes the new bytes. An archive
intact when recorded and damaged now is `damaged` whatever its stat (a cut-off file has a new size): it keeps its
recorded members, and `index/salvage.py` says which of them its damage reaches. A file that cannot be read now
keeps its recorded hash too (`unreadable`, read again next run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cloudvault.catalog import files as catalog_files
from cloudvault.catalog import generations
from cloudvault.catalog.generations import Recorded
from cloudvault.index.context import MirrorContext
from cloudvault.models import FileStat, Flag

KEPT = ("changed_in_place", "damaged", "unreadable")  # verdicts that keep the recorded row as the reference
# flag kinds a kept row is given by the run that kept it (cleared when a later run judges it again)
KEEP_FLAGS = ("changed_in_place", "damaged_frame", "damaged_member")
ACCEPT_HINT = "`vault verify` to see it, `vault index --accept {path}` to take the new bytes as a new version"


def judge(old: Recorded | None, st: FileStat, digest: str | None, status: str = "ok", taken: bool = False) -> str:
    """The verdict on a file read again (digest: its BLAKE3 now; status: an archive's scan outcome). taken: its
    new bytes are a new version whatever they are (`--accept`, or its stat moved while it was read: an update
    under way, read again next run, never taken for corruption)."""
    if old is None:
        return "added"
    if old.kind == st.kind and (old.blake3, old.link_target) == (digest, st.link_target):
        return "same" if old.status in (None, status) else "modified"
    if taken:
        return "modified"
    if st.kind == "file" and digest is None and old.blake3 is not None:
        return "unreadable"
    if old.status == "ok" and status != "ok":
        return "damaged"
    if old.blake3 and digest and old.kind == st.kind and (old.size, old.mtime_ns) == (st.size, st.mtime_ns):
        return "changed_in_place"
    return "modified"


@dataclass
class Version:
    """A file read by this run, judged against what was recorded."""

    verdict: str
    old: Recorded | None
    st: FileStat
    digest: str | None

    @property
    def kept(self) -> bool:
        return self.verdict in KEPT

    @property
    def in_place(self) -> bool:
        """Same size and mtime as recorded, other bytes: suspected corruption (a damaged archive can be both)."""
        old, st = self.old, self.st
        return self.kept and self.verdict != "unreadable" and (old.size, old.mtime_ns) == (st.size, st.mtime_ns)


def judged(ctx: MirrorContext, st: FileStat, digest: str | None, status: str, flags: list[Flag]) -> Version:
    """The verdict on st as read (flags: what the read found; changed_while_indexing makes an update of it)."""
    old = generations.recorded(ctx.conn, ctx.mirror_id, st.path)
    moving = any(f.kind == "changed_while_indexing" for f in flags)
    return Version(judge(old, st, digest, status, moving or st.path in ctx.accepted), old, st, digest)


def record_new(ctx: MirrorContext, version: Version, insert: Callable[[], int]) -> int:
    """The run's row for a version that is not kept: the old one into history when modified, then insert() (which
    replaces it), stamped with the generation that recorded its content. Inside the caller's transaction."""
    if version.verdict == "modified":
        generations.retire(ctx.conn, version.old.file_id, ctx.generation)
    file_id = insert()
    same = version.verdict == "same"
    generations.stamp(ctx.conn, file_id, version.old.generation if same else ctx.generation)
    if version.verdict in ("added", "modified"):
        setattr(ctx.report, version.verdict, getattr(ctx.report, version.verdict) + 1)
    return file_id


def keep_recorded(ctx: MirrorContext, version: Version, flags: list[Flag]) -> None:
    """The recorded row stays the reference: its stat is brought up to date (an unreadable file's is not, so it
    is read again), flags says why, and the run notes the event. Inside the caller's transaction."""
    conn, old, st = ctx.conn, version.old, version.st
    was_damaged = bool(catalog_files.flagged_paths(conn, ctx.mirror_id, ("damaged_frame",), old.file_id))
    for kind in (*KEEP_FLAGS, *catalog_files.RETRY_KINDS):
        catalog_files.clear_flags(conn, ctx.mirror_id, kind, old.file_id)
    if version.verdict != "unreadable":
        generations.keep_signature(conn, old.file_id, st)
    if version.in_place:
        detail = (f"same size and mtime as recorded but other bytes (BLAKE3 {(version.digest or '-')[:16]}, "
                  f"recorded {old.blake3[:16]}): suspected corruption, the recorded hash stays the reference; "
                  + ACCEPT_HINT.format(path=st.path))  # fmt: skip
        flags = [Flag("changed_in_place", detail), *flags]
        generations.note(conn, ctx.generation, ctx.mirror_id, st.path, "changed_in_place", old.blake3, version.digest)
        ctx.report.changed_in_place += 1
    if version.verdict == "damaged" and not was_damaged:
        generations.note(conn, ctx.generation, ctx.mirror_id, st.path, "damaged", old.blake3, version.digest)
        ctx.report.newly_damaged += 1
    catalog_files.insert_flags(conn, ctx.mirror_id, ctx.entry_for(st.path), old.file_id, flags)
    ctx.report.count(flags)


def count_still_flagged(ctx: MirrorContext, read: set[str]) -> None:
    """Files of the mirror kept as the reference by an earlier run and not read by this one: still suspect."""
    flagged = catalog_files.flagged_paths(ctx.conn, ctx.mirror_id, KEEP_FLAGS[:2])
    ctx.report.still_flagged += len(flagged - read)
