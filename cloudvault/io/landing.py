"""The one safe writer of members into a folder (extract -o, repro's input staging, env restore's staging):
where a member lands, which links it may make, and the crash-safe writes.

The folder is resolved once; every path and link target is checked against it, following the links already
written, so a chain (`up -> ..`, then `x -> up/..`) cannot climb out, and nothing is written through a symlink
an earlier member (or anyone) put there. A folder found safe is not resolved again until the next symlink lands
through symlink_target (an env's 100,000 files). Paths are str (no pathlib: start-up).
"""

from __future__ import annotations

import contextlib
import os
import posixpath

from cloudvault.archive.paths import unsafe_reason
from cloudvault.atomic import atomic_write, is_stale_temp
from cloudvault.errors import DestinationExists, UnsafeMember, UsageError
from cloudvault.models import Member


class Landing:
    """A folder members land in. keep_path: a member keeps its folders (else only its file name); name: how
    messages call the folder ('the destination', 'the env'); outcome: what a refusal adds ('nothing was written');
    link_hint: what a refused symlink's message adds (the option that allows it)."""

    def __init__(self, folder: str | os.PathLike, *, keep_path: bool = True, allow_outside_links: bool = False,
                 name: str = "the destination", outcome: str = "nothing was written",
                 link_hint: str = "") -> None:  # fmt: skip
        folder = os.fspath(folder).rstrip("/") or os.fspath(folder)  # `-o out/` is the folder out
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise UsageError(detail=f"-o {folder} is a file; give a folder to write into (or - for stdout)")
        os.makedirs(folder, exist_ok=True)
        self.root = os.path.realpath(folder)
        self.keep_path, self.allow_outside_links = keep_path, allow_outside_links
        self.name, self.outcome, self.link_hint = name, outcome, link_hint
        self._checked: set[str] = set()  # folders found inside with no link on the way (forgotten at each symlink)
        remove_stale_temps(self.root)

    def inside(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + os.sep)

    def path_for(self, member: Member, rel: str | None = None) -> str:
        """Where member lands: rel (a path under the folder, as repro stages a folder) when given, else its own
        path (keep_path) or file name. An unsafe member, or a landing outside, is refused (UnsafeMember)."""
        link = member.link_target if member.type == "hardlink" else None
        reason = unsafe_reason(member.path, member.type, link)
        if reason:
            raise UnsafeMember(path=member.path, why=f"{reason}; {self.outcome}")
        if rel is None:
            rel = local_name(member) if self.keep_path else posixpath.basename(local_name(member))
        out = os.path.join(self.root, rel)
        folder = os.path.dirname(out)
        if folder in self._checked and os.path.basename(out) != ".." and not os.path.islink(out):
            return os.path.normpath(out)  # its folder was checked, and no symlink has landed since
        if not self.inside(os.path.realpath(out)):
            raise UnsafeMember(path=member.path, why=f"it would land outside {self.name}; {self.outcome}")
        self._refuse_links_on_the_way(member, out)
        self._checked.add(folder)
        return os.path.normpath(out)  # as a Path would show it (`a//b` -> `a/b`); a '..' was refused above

    def _refuse_links_on_the_way(self, member: Member, out: str) -> None:
        folder = os.path.dirname(out)
        while self.inside(folder) and folder != self.root:
            if os.path.islink(folder):
                raise UnsafeMember(path=member.path, why=f"it would be written through the symlink {folder}")
            folder = os.path.dirname(folder)

    def symlink_target(self, member: Member, out: str, moved_prefix: tuple[str, str] | None = None, *,
                       outside_ok: bool = False) -> str:  # fmt: skip
        """The target the symlink at out gets: refused when it would resolve outside the folder (unless
        allow_outside_links, or outside_ok for this one link: a venv's interpreter). moved_prefix (old, new): an
        absolute target into old, the folder's original place, is checked as the path under the folder it names
        and moved to new (an env restored elsewhere). The folders checked before are checked again after it."""
        self._checked.clear()  # the link may turn a folder name seen before into a way out
        target = link_on_disk(member)
        old, new = moved_prefix or ("", "")
        into_old = bool(old) and (target == old or target.startswith(old + "/"))
        if into_old:
            moved, lands = new + target[len(old) :], os.path.join(self.root, target[len(old) + 1 :])
        else:
            moved, lands = target, os.path.join(os.path.dirname(out), target)
        outside = (os.path.isabs(target) and not into_old) or not self.inside(os.path.realpath(lands))
        if outside and not (self.allow_outside_links or outside_ok):
            why = f"symlink to {target!r} points outside {self.name}{self.link_hint}"
            raise UnsafeMember(path=member.path, why=why)
        return moved

    def hardlink_source(self, member: Member, rel_target: str | None) -> str:
        """The file already landed that a hardlink member links to (rel_target: its path under the folder); it
        must be a regular file inside the folder, not a link."""
        target = member.link_target or ""
        if not rel_target or unsafe_reason(target, "file", None):
            raise UnsafeMember(path=member.path, why=f"hardlink to {target!r} lies outside {self.name}")
        source = os.path.join(self.root, rel_target)
        if not os.path.realpath(source).startswith(self.root + os.sep):
            raise UnsafeMember(path=member.path, why=f"hardlink to {target!r} resolves outside {self.name}")
        if not os.path.isfile(source) or os.path.islink(source):
            raise UnsafeMember(path=member.path, why=f"hardlink to {target!r}, which is not a file")
        return source


def write_symlink(target: str, out: str, force: bool) -> None:
    """A symlink at out; an existing one (or file) is replaced only with force, a folder never."""
    if os.path.isdir(out) and not os.path.islink(out):
        raise UsageError(detail=f"{out} is a folder; vault never replaces a folder with a link")
    if os.path.lexists(out):
        if not force:
            raise DestinationExists(path=out)
        os.unlink(out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    os.symlink(target, out)


def write_chunks(chunks, out: str, *, force: bool = False, mode: int = 0o644) -> None:
    """A member's bytes to out: a temp name beside it, fsynced, renamed into place (atomic_write)."""
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with atomic_write(out, force=force, mode=mode) as fh:
        for chunk in chunks:
            fh.write(chunk)


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


def remove_stale_temps(folder: str) -> None:
    """Temp files of a writer that was killed (its pid gone) are vault's own: remove them."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if is_stale_temp(name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name))
