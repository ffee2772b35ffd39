"""Stream one env archive's members into a staging folder: paths kept inside it, bytes verified as they pass
(BLAKE3 by `members`, sha256 kept for conda-meta and pip RECORD), files holding the old prefix noted."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from cloudvault.errors import UnsafeMember
from cloudvault.io.landing import Landing
from cloudvault.io.members import MemberReader, read_order
from cloudvault.models import Member
from cloudvault.progress import Progress
from cloudvault.restore.env import venv as env_venv
from cloudvault.restore.env.prefix import PrefixScanner

SKIPPED_TYPES = ("fifo",)


@dataclass
class Staged:
    """What landed in staging: counts, sha256 per file, and the files that hold the old prefix (rel -> has NUL)."""

    files: int = 0
    dirs: int = 0
    links: int = 0
    bytes: int = 0
    sha256: dict[str, str] = field(default_factory=dict)
    holding_prefix: dict[str, bool] = field(default_factory=dict)
    dir_modes: dict[str, int] = field(default_factory=dict)


def env_relative(member_path: str, folder: str) -> str | None:
    """The member's path inside the env folder ('' for the folder itself), None when it lies outside it."""
    if not folder:
        return member_path
    if member_path == folder:
        return ""
    return member_path[len(folder) + 1 :] if member_path.startswith(folder + "/") else None


class StagingArea:
    """The staging folder: a Landing (where a member may land, which links and hardlinks it may make) and what env
    staging keeps beside it: the env's folder in the archive, the old and new prefix, the venv's interpreter links."""

    def __init__(self, root: Path, folder: str, old: str, new: str, venv=None, interpreter=None) -> None:
        self.landing = Landing(root, name="the env", outcome="nothing was restored")
        self.root = self.landing.root
        self.folder = folder
        self.old, self.new = old, new
        self.scan = old != new
        self.interpreter_links = set(venv.links) if venv is not None else set()  # env-relative bin/python*
        self.interpreter = interpreter  # env_venv.Interpreter: what the outside link says after --python
        self.made_dirs: set[str] = set()  # folders made here: the next file in one does not make it again

    def symlink_target(self, member: Member, out: str) -> str:
        """The symlink's target (Landing's rules, moved to the new prefix when it pointed into the old one); a
        venv's interpreter link may point outside, to its base python (or --python's), and is never followed."""
        target = member.link_target or ""
        into_old = target == self.old or target.startswith(self.old + "/")
        if os.path.relpath(out, self.root) in self.interpreter_links and not into_old:
            return env_venv.link_target(self.landing.symlink_target(member, out, outside_ok=True), self.interpreter)
        return self.landing.symlink_target(member, out, (self.old, self.new))


def stage(reader: MemberReader, members: list[Member], area: StagingArea, progress: Progress) -> Staged:
    """Write members (one forward pass) under area; raises UnsafeMember, HashMismatch, OSError (a full disk)."""
    staged = Staged()
    for member in read_order(members):
        rel = env_relative(member.path, area.folder)
        if rel is None or member.type in SKIPPED_TYPES:
            continue
        _stage_one(reader, member, rel, area, staged, progress)
    return staged


def _stage_one(reader: MemberReader, member: Member, rel: str, area: StagingArea, staged: Staged,
               progress: Progress) -> None:  # fmt: skip
    out = area.landing.path_for(member, rel) if rel else area.root
    if member.type == "dir":
        os.makedirs(out, mode=0o700, exist_ok=True)
        staged.dir_modes[rel] = member.mode & 0o7777
        staged.dirs += 1
        return
    if member.type not in ("file", "symlink", "hardlink"):
        raise UnsafeMember(path=member.path, why=f"{member.type} members do not belong in an env")
    os.makedirs(os.path.dirname(out), mode=0o700, exist_ok=True)
    if os.path.lexists(out) and not os.path.isdir(out):
        os.unlink(out)  # the same path twice in one archive: the later one wins, as with tar
    if member.type == "symlink":
        os.symlink(area.symlink_target(member, out), out)
        staged.links += 1
    elif member.type == "hardlink":
        _hardlink(member, out, area, staged)
    else:
        progress.current(rel)
        _write_file(reader, member, rel, out, area, staged)
    os.utime(out, (member.mtime, member.mtime), follow_symlinks=False)


def _hardlink(member: Member, out: str, area: StagingArea, staged: Staged) -> None:
    rel_target = env_relative(member.link_target or "", area.folder)
    source = area.landing.hardlink_source(member, rel_target)
    os.link(source, out)
    rel = os.path.relpath(out, area.root)
    staged.sha256[rel] = staged.sha256.get(rel_target, "")
    if rel_target in staged.holding_prefix:
        staged.holding_prefix[rel] = staged.holding_prefix[rel_target]
    staged.links += 1


def _write_file(reader: MemberReader, member: Member, rel: str, out: str, area: StagingArea, staged: Staged) -> None:
    digest = hashlib.sha256()
    scanner = PrefixScanner(area.old.encode()) if area.scan else None
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        for chunk in reader.open(member):
            fh.write(chunk)
            digest.update(chunk)
            if scanner:
                scanner.feed(chunk)
        os.fchmod(fh.fileno(), member.mode & 0o1777)  # setuid/setgid bits are not restored
    staged.sha256[rel] = digest.hexdigest()
    if scanner and scanner.found:
        staged.holding_prefix[rel] = scanner.has_nul
    staged.files += 1
    staged.bytes += member.size


def finish_dirs(root: Path, staged: Staged) -> None:
    """Folder modes last (a read-only folder would have refused the files written into it), deepest first."""
    for rel in sorted(staged.dir_modes, key=len, reverse=True):
        os.chmod(os.path.join(root, rel), staged.dir_modes[rel] | 0o700)
