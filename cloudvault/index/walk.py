"""Walk a local mirror without following links; names are kept as bytes so none is lost."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from cloudvault.models import FileStat


@dataclass(frozen=True)
class WalkProblem:
    path: str
    detail: str


def text_path(raw: bytes) -> tuple[str, bytes | None]:
    """The UTF-8 text of a name, and its raw bytes when the text alone would lose them."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return raw.decode("utf-8", "backslashreplace"), raw


def entry_of(path: str) -> str:
    """The entry a mirror path belongs to: its top-level directory, '' for files at the top."""
    head, sep, _ = path.partition("/")
    return head if sep else ""


def walk_local(root: bytes) -> Iterator[FileStat | WalkProblem]:
    """Every file and symlink under root, depth first, sorted by name; unreadable directories reported."""
    stack = [b""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            yield WalkProblem(text_path(rel_dir)[0], f"cannot list directory: {exc.strerror}")
            continue
        subdirs = []
        for item in items:
            rel = os.path.join(rel_dir, item.name) if rel_dir else item.name
            try:
                st = item.stat(follow_symlinks=False)
            except OSError as exc:
                yield WalkProblem(text_path(rel)[0], f"cannot stat: {exc.strerror}")
                continue
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(rel)
            elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                yield _file_stat(root, rel, st)
        stack.extend(reversed(subdirs))


def _file_stat(root: bytes, rel: bytes, st: os.stat_result) -> FileStat:
    path, raw = text_path(rel)
    link = None
    kind = "file"
    if stat.S_ISLNK(st.st_mode):
        kind = "symlink"
        link = text_path(os.readlink(os.path.join(root, rel)))[0]
    return FileStat(
        path=path,
        raw_path=raw,
        kind=kind,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        ctime_ns=st.st_ctime_ns,
        inode=st.st_ino,
        mode=st.st_mode,
        link_target=link,
    )
