"""Pull members out of archives (and plain files out of the mirror) through `members`, verified and atomic."""

from __future__ import annotations

import contextlib
import os
import posixpath
import sqlite3
import sys
from collections import namedtuple

from cloudvault.archive.paths import unsafe_reason
from cloudvault.archive.sparse import Hole
from cloudvault.atomic import atomic_write, is_stale_temp
from cloudvault.catalog.lookup import EntryMembers
from cloudvault.errors import AmbiguousMember, DestinationExists, MemberNotFound, NoSpace, UnsafeMember, UsageError
from cloudvault.members import MemberReader, MemberStream, read_order
from cloudvault.models import Member
from cloudvault.progress import Progress

Written = namedtuple("Written", "path dest size blake3 archive status")


class ExtractReport:
    """What was written, and how much was decompressed to write it (the measure of a good seek)."""

    def __init__(self) -> None:
        self.written: list[Written] = []
        self.frames_read = 0
        self.bytes_decompressed = 0

    def to_json(self) -> dict:
        return {"written": [w._asdict() for w in self.written], "frames_read": self.frames_read,
                "bytes_decompressed": self.bytes_decompressed}  # fmt: skip


# -- finding what to extract -------------------------------------------------------------------------------------
def find_targets(
    conn: sqlite3.Connection, mirror_id: int, entry_id: str, query: str, archive: str | None = None
) -> list[Member]:
    """Exact path, a path through an archive (x.tar.zst/inner), a glob or folder, else a unique suffix."""
    if ".tar.zst/" in query and archive is None:
        archive_part, _, query = query.partition(".tar.zst/")
        archive = archive_part.rsplit("/", 1)[-1] + ".tar.zst"
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


def _names(targets: list[Member]) -> str:
    return ", ".join(f"{t.path} (in {t.archive.rsplit('/', 1)[-1]})" if t.archive else t.path for t in targets[:8])


def _closest(paths: list[str], query: str) -> str:
    import difflib

    by_name = {posixpath.basename(p): p for p in paths}
    close = difflib.get_close_matches(posixpath.basename(query), list(by_name), n=3, cutoff=0.5)
    return f"; closest: {', '.join(by_name[c] for c in close)}" if close else ""


# -- where things land -------------------------------------------------------------------------------------------
class Destination:
    """The output folder, resolved once; every path and link target is checked against it, following the links
    already written (a chain `up -> ..`, `x -> up/..` cannot climb out). Paths are str (no pathlib: start-up)."""

    def __init__(self, folder: str | os.PathLike, keep_path: bool, allow_outside_links: bool) -> None:
        folder = os.fspath(folder).rstrip("/") or os.fspath(folder)  # `-o out/` is the folder out
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise UsageError(detail=f"-o {folder} is a file; give a folder to write into (or - for stdout)")
        os.makedirs(folder, exist_ok=True)
        self.root = os.path.realpath(folder)
        self.keep_path = keep_path
        self.allow_outside_links = allow_outside_links
        _remove_stale_temps(self.root)

    def inside(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + os.sep)

    def path_for(self, member: Member, rel: str | None = None) -> str:
        """Where member lands: rel (a path under the destination, as repro stages a folder) when given, else its
        own path (--keep-path) or file name. An unsafe member, or a landing outside, is refused."""
        link = member.link_target if member.type == "hardlink" else None
        reason = unsafe_reason(member.path, member.type, link)
        if reason:
            raise UnsafeMember(path=member.path, why=reason + "; nothing was written")
        if rel is None:
            rel = local_name(member) if self.keep_path else posixpath.basename(local_name(member))
        out = os.path.join(self.root, rel)
        if not self.inside(os.path.realpath(out)):
            raise UnsafeMember(path=member.path, why="it would land outside the destination")
        self._refuse_links_on_the_way(member, out)
        return os.path.normpath(out)  # as a Path would show it (`a//b` -> `a/b`); a '..' was refused above

    def _refuse_links_on_the_way(self, member: Member, out: str) -> None:
        """Nothing is written through a symlink that an earlier member (or anyone) put in the destination."""
        folder = os.path.dirname(out)
        while self.inside(folder) and folder != self.root:
            if os.path.islink(folder):
                raise UnsafeMember(path=member.path, why=f"it would be written through the symlink {folder}")
            folder = os.path.dirname(folder)

    def check_link(self, member: Member, out: str) -> None:
        target = link_on_disk(member)
        resolved = os.path.realpath(os.path.join(os.path.dirname(out), target))
        if (os.path.isabs(target) or not self.inside(resolved)) and not self.allow_outside_links:
            raise UnsafeMember(path=member.path, why=f"symlink to {target!r} points outside the destination "
                               "(--allow-outside-links to create it anyway)")  # fmt: skip


def link_on_disk(member: Member) -> str:
    """A symlink's target as it should be on disk: its original bytes when they are not valid UTF-8."""
    if member.raw_link_target is not None:
        return os.fsdecode(member.raw_link_target)
    return member.link_target or ""


def local_name(member: Member) -> str:
    """The member's path as it should appear on disk: its original bytes when the name is not valid UTF-8."""
    raw = member.raw_path
    if raw is None:
        return member.path
    if member.archive is None and member.entry_id:  # a plain file's raw path still has its entry folder
        raw = raw[len(member.entry_id.encode()) + 1 :]
    while raw.startswith(b"./"):
        raw = raw[2:]
    return os.fsdecode(raw.rstrip(b"/"))


def _remove_stale_temps(folder: str) -> None:
    """Temp files of an extract that was killed (its pid gone) are vault's own: remove them."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if is_stale_temp(name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name))


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
def extract(
    conn: sqlite3.Connection,
    targets: list[Member],
    dest: str | os.PathLike | None,
    *,
    keep_path: bool = False,
    force: bool = False,
    allow_outside_links: bool = False,
    progress: Progress | None = None,
) -> ExtractReport:
    """Write targets under dest (None: stdout), one forward pass per archive in offset order, each verified."""
    report = ExtractReport()
    progress = progress or Progress()
    if dest is not None and not keep_path:
        _refuse_name_clash(targets)
    if dest is not None:
        from cloudvault.catalog.mirror_guard import refuse_write_into_mirror

        refuse_write_into_mirror(conn, dest, "extract -o")
    where = Destination(dest, keep_path, allow_outside_links) if dest is not None else None
    reader = MemberReader(conn, on_data=progress.advance)
    try:
        for member in read_order(targets):
            if member.type == "dir":
                if where is not None and keep_path and member.path != ".":
                    os.makedirs(where.path_for(member), exist_ok=True)
                continue
            report.written.append(_extract_one(reader, member, where, force))
    except NoSpace as exc:
        kept = [w.dest for w in report.written]
        if kept:
            raise NoSpace(path=exc.fields["path"], kept=f"; written before it and kept: {', '.join(kept[:10])}"
                          + (f" and {len(kept) - 10} more" if len(kept) > 10 else "")) from None  # fmt: skip
        raise
    finally:
        reader.close()
        report.frames_read = reader.frames_read
        report.bytes_decompressed = reader.bytes_decompressed
        progress.finish()
    return report


def _extract_one(reader: MemberReader, member: Member, where: Destination | None, force: bool) -> Written:
    if where is None:
        if member.type == "symlink":
            raise UnsafeMember(path=member.path, why="a symlink has no data to write to stdout")
        stream = reader.open(member)
        _to_stdout(stream)
        return _written(member, "-", stream)
    out = where.path_for(member)
    if member.type == "symlink":
        where.check_link(member, out)
        _symlink(link_on_disk(member), out, force)
        return Written(member.path, out, 0, None, member.archive, "link")
    stream = reader.open(member)
    _write_file(stream, out, force)
    return _written(member, out, stream)


def _written(member: Member, dest: str, stream: MemberStream) -> Written:
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


def _symlink(target: str, out: str, force: bool) -> None:
    if os.path.isdir(out) and not os.path.islink(out):
        raise UsageError(detail=f"{out} is a folder; vault never replaces a folder with a link")
    if os.path.lexists(out):
        if not force:
            raise DestinationExists(path=out)
        os.unlink(out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    os.symlink(target, out)


def _to_stdout(stream: MemberStream) -> None:
    """Bytes go out as they come (pipes want them); a mismatch found at the end still exits 5."""
    out = sys.stdout.buffer
    for chunk in stream:
        out.write(chunk)
    out.flush()
