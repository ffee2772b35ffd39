"""Pull members out of archives (and plain files out of the mirror) through `members`, verified and atomic."""

from __future__ import annotations

import os
import posixpath
import sqlite3
import sys
from collections.abc import Callable

from cloudvault.archive.formats import through_archive
from cloudvault.atomic import atomic_write
from cloudvault.catalog import query as catalog_query  # resolve_entry looked up at the call
from cloudvault.catalog.flagged import one_block_xz, secret_flags
from cloudvault.catalog.lookup import EntryMembers
from cloudvault.errors import (
    AmbiguousMember,
    CorruptArchive,
    IntegrityError,
    MemberNotFound,
    NoSpace,
    UnsafeMember,
    UsageError,
)
from cloudvault.io.landing import Landing, write_symlink
from cloudvault.io.members import MemberReader, MemberStream, read_order
from cloudvault.models import Hole, Member
from cloudvault.progress import Progress
from cloudvault.record import record

Written = record("Written", "path dest size blake3 archive status")
LINK_HINT = " (--allow-outside-links to create it anyway)"


class ExtractReport(record("ExtractReport", "written not_written frames_read bytes_decompressed without_pieces")):
    """What was written, and how much was decompressed to write it (the measure of a good seek): the typed result
    of `vault extract`, and its --json. not_written: --salvage's (member label, why) of what did not verify;
    without_pieces: members indexed before piece hashes, held back whole until verified."""

    __slots__ = ()

    def to_json(self) -> dict:
        return {"written": [w._asdict() for w in self.written], "frames_read": self.frames_read,
                "bytes_decompressed": self.bytes_decompressed, "without_pieces": list(self.without_pieces),
                "not_written": [{"path": label, "why": why} for label, why in self.not_written]}  # fmt: skip


class _Tally:
    """What an extract has written so far; frozen into an ExtractReport at its end."""

    def __init__(self) -> None:
        self.written: list[Written] = []
        self.not_written: list[tuple[str, str]] = []
        self.without_pieces: list[str] = []

    def report(self, reader: MemberReader) -> ExtractReport:
        return ExtractReport(tuple(self.written), tuple(self.not_written), reader.frames_read,
                             reader.bytes_decompressed, tuple(self.without_pieces))  # fmt: skip


# What `vault extract` is asked: PATHs of one entry (globs, folders, x.tar.zst/inner), only from one archive or
# any, written under dest (None: stdout) as options say.
ExtractRequest = record("ExtractRequest", "entry paths archive dest options")


def extract_entry(conn: sqlite3.Connection, request: ExtractRequest,
                  warn_secret: Callable[[str, str], None] | None = None,
                  progress_for: Callable[[int, int], Progress | None] | None = None,
                  note_slow: Callable[[str, int], None] | None = None) -> ExtractReport:  # fmt: skip
    """`vault extract`: the entry's targets found, each one flagged as holding a secret told to warn_secret(label,
    detail) and each large one-block xz archive they are in to note_slow(path, decompressed bytes) before a byte is
    written, then written; progress_for(total bytes, count) may give a Progress."""
    mirror_id, entry_id, _ = catalog_query.resolve_entry(conn, request.entry)
    targets = entry_targets(conn, mirror_id, entry_id, request.paths, request.archive)
    for label, detail in secret_flags(conn, targets):
        if warn_secret:
            warn_secret(label, detail)
    archives = tuple({t.file_id for t in targets if t.archive})
    for path, raw_size in (one_block_xz(conn, archives) if note_slow and archives else {}).items():
        note_slow(path, raw_size)
    progress = progress_for(sum(t.size for t in targets), len(targets)) if progress_for else None
    return extract(conn, targets, request.dest, request.options, progress)


def entry_targets(conn: sqlite3.Connection, mirror_id: int, entry_id: str, paths: list[str],
                  archive: str | None) -> list[Member]:  # fmt: skip
    """The members and files the paths name, once each; a file read as an archive gives way to its members."""
    found: dict = {}
    for path in paths:
        found.update({(t.file_id, t.path, t.data_offset): t for t in find_targets(conn, mirror_id, entry_id, path,
                                                                                  archive)})  # fmt: skip
    read_as_archives = {t.file_id for t in found.values() if t.archive}  # its members, not its compressed bytes
    return [t for t in found.values() if t.archive or t.file_id not in read_as_archives]


# -- finding what to extract -------------------------------------------------------------------------------------
def find_targets(
    conn: sqlite3.Connection, mirror_id: int, entry_id: str, query: str, archive: str | None = None
) -> list[Member]:
    """Exact path, a path through an archive (x.tar.zst/inner, x.tgz/inner), a glob or folder, else a unique
    suffix."""
    if archive is None and not _through_member(conn, mirror_id, entry_id, query):
        archive, query = through_archive(query)
    found = EntryMembers(conn, mirror_id, entry_id, archive)
    query = query.strip("/")
    exact = found.exact(query)
    if exact:
        if len({(m.archive, m.path) for m in exact}) > 1:
            raise AmbiguousMember(path=query, entry=entry_id, count=len(exact), candidates=_names(exact))
        return exact[-1:]  # the same path twice in one archive: the last one wins, as tar does
    if any(c in query for c in "*?["):
        return found.glob(query)
    under = found.under(query)
    if under:
        return under
    candidates = found.suffix(query)
    if len(candidates) == 1:
        return candidates
    if candidates:
        raise AmbiguousMember(path=query, entry=entry_id, count=len(candidates), candidates=_names(candidates))
    raise MemberNotFound(path=query, entry=entry_id, hint=_closest(found.all_paths(), query))


def _through_member(conn: sqlite3.Connection, mirror_id: int, entry_id: str, query: str) -> bool:
    """Whether x.tgz/inner names a member that is itself an archive (a .conda's pkg-x.tar.zst/..., data/x.tgz/...
    inside a tar: archive/nested.py), whose members are recorded with that path, rather than an archive file of
    the mirror."""
    name, rest = through_archive(query)
    if name is None:
        return False
    head = query[: len(query) - len(rest)].strip("/")
    return bool(EntryMembers(conn, mirror_id, entry_id, archive="").exact(head))  # "": members only


def _names(targets: list[Member]) -> str:
    return ", ".join(f"{t.path} (in {t.archive.rsplit('/', 1)[-1]})" if t.archive else t.path for t in targets[:8])


def _closest(paths: list[str], query: str) -> str:
    import difflib

    by_name = {posixpath.basename(p): p for p in paths}
    close = difflib.get_close_matches(posixpath.basename(query), list(by_name), n=3, cutoff=0.5)
    return f"; closest: {', '.join(by_name[c] for c in close)}" if close else ""


def _refuse_name_clash(targets: list[Member]) -> None:
    """Without --keep-path every file lands in one folder: two with one name would clash (folders never do)."""
    seen: dict[str, list[str]] = {}
    for t in targets:
        if t.type != "dir":
            seen.setdefault(posixpath.basename(t.path.rstrip("/")), []).append(t.path)
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    if clashes:
        name, paths = next(iter(clashes.items()))
        more = f" (and {len(clashes) - 1} other name(s))" if len(clashes) > 1 else ""
        raise UsageError(detail=f"{len(paths)} members are named {name!r} ({', '.join(paths[:3])}){more}; "
                         "pass --keep-path to keep their folders")  # fmt: skip


# -- writing -----------------------------------------------------------------------------------------------------
# How `vault extract` writes: folders kept, existing files replaced, links out allowed; with salvage, a member
# that is damaged or does not verify is left out (the report says why) and the rest are written. (A namedtuple:
# extract's start-up imports no dataclasses.)
ExtractOptions = record("ExtractOptions", "keep_path force allow_outside_links salvage", defaults=(False,) * 4)


def extract(
    conn: sqlite3.Connection,
    targets: list[Member],
    dest: str | os.PathLike | None,
    options: ExtractOptions | None = None,
    progress: Progress | None = None,
) -> ExtractReport:
    """Write targets under dest (None: stdout), one forward pass per archive in offset order, each verified; a
    member that fails ends the extract, unless options.salvage."""
    options = options or ExtractOptions()
    keep_path, force, allow_outside_links = options.keep_path, options.force, options.allow_outside_links
    report = _Tally()
    progress = progress or Progress()
    if dest is not None and not keep_path:
        _refuse_name_clash(targets)
    if dest is not None:
        from cloudvault.catalog.mirror_guard import refuse_write_into_mirror

        refuse_write_into_mirror(conn, dest, "extract -o")
    where = Landing(dest, keep_path=keep_path, allow_outside_links=allow_outside_links, link_hint=LINK_HINT) \
        if dest is not None else None  # fmt: skip
    reader = MemberReader(conn, on_data=progress.advance)
    try:
        for member in read_order(targets):
            if member.type == "dir":
                if where is not None and keep_path and member.path != ".":
                    os.makedirs(where.path_for(member), exist_ok=True)
                continue
            try:
                report.written.append(_extract_one(reader, member, where, force, report))
            except IntegrityError as exc:
                if options.salvage and not isinstance(exc, UnsafeMember):
                    report.not_written.append((member.label, exc.message.replace("; nothing was written", "")))
                    continue
                if not member.archive or member.archive in exc.message or type(exc) is not IntegrityError:
                    raise
                raise CorruptArchive(path=member.archive, detail=f"{member.path}: {exc.message}") from None
    except NoSpace as exc:
        kept = [w.dest for w in report.written]
        if kept:
            raise NoSpace(path=exc.fields["path"], kept=f"; written before it and kept: {', '.join(kept[:10])}"
                          + (f" and {len(kept) - 10} more" if len(kept) > 10 else "")) from None  # fmt: skip
        raise
    finally:
        reader.close()
        progress.finish()
    return report.report(reader)


def _extract_one(reader: MemberReader, member: Member, where: Landing | None, force: bool,
                 report: _Tally) -> Written:  # fmt: skip
    if where is None:
        if member.type == "symlink":
            raise UnsafeMember(path=member.path, why="a symlink has no data to write to stdout")
        stream = reader.open(member)
        _to_stdout(stream)
        return _written(member, "-", stream, report)
    out = where.path_for(member)
    if member.type == "symlink":
        write_symlink(where.symlink_target(member, out), out, force)
        return Written(member.path, out, 0, None, member.archive, "link")
    stream = reader.open(member)
    _write_file(stream, out, force)
    return _written(member, out, stream, report)


def _written(member: Member, dest: str, stream: MemberStream, report: _Tally) -> Written:
    if stream.withheld:
        report.without_pieces.append(member.label)
    return Written(member.path, dest, stream.size, stream.blake3,
                   member.archive, "ok" if stream.verified else "unverified")  # fmt: skip


def _write_file(stream: MemberStream, out: str, force: bool) -> None:
    """Temp name beside out, every byte hashed, fsync, rename only if the hash matches; a sparse member's holes are
    seeked over, so they are holes on disk where the filesystem has them."""
    member = stream.member
    with atomic_write(out, force=force, mode=0o600) as fh:
        for chunk in stream:
            if type(chunk) is Hole:
                fh.seek(len(chunk), os.SEEK_CUR)
            else:
                fh.write(chunk)
        fh.truncate()  # a file that ends in a hole: its size
        fh.flush()  # before utime: a later flush would set mtime to now
        os.fchmod(fh.fileno(), member.mode & 0o777)
        os.utime(fh.fileno(), (member.mtime, member.mtime))


def _to_stdout(stream: MemberStream) -> None:
    """Bytes go out as their pieces verify (pipes want them early); a piece that does not match exits 5 with
    nothing of it written."""
    out = sys.stdout.buffer
    for chunk in stream:
        out.write(chunk)
    out.flush()
