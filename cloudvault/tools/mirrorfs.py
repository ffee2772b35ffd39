"""Where a mirror's bytes come from: a local directory, or an fsspec URL (ssh/sftp, s3, memory ...).

Everything above this layer names files by their path inside the mirror and asks this for a stream, a
stat or a hash; only remote mirrors pay for what they read (archives are read by ranges through seek).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from typing import BinaryIO

from cloudvault.errors import MirrorNotFound, MirrorUnreachable
from cloudvault.models import FileStat
from cloudvault.record import record

REMOTE_BLOCK = 1 << 20  # ranged reads of this size; a frame costs about its own compressed size


def is_url(root: str) -> bool:
    return "://" in root and not root.startswith("file://")


def open_mirror(root: str):
    """The mirror at root: LocalMirror for paths (and file:// URLs), FsspecMirror for other URLs."""
    if is_url(root):
        return FsspecMirror(root)
    return LocalMirror(root.removeprefix("file://"))


class LocalMirror:
    """A directory on this machine; names are handled as bytes so none is lost."""

    remote = False

    def __init__(self, root: str) -> None:
        self.root = root
        self._broot = os.fsencode(root)

    def exists(self) -> bool:
        return os.path.isdir(self.root)

    def top_dirs(self) -> list[str]:
        # a name that is not UTF-8 in the text form the walk gives its files (their entry is named alike)
        found = os.scandir(self.root)
        return sorted(text_path(os.fsencode(e.name))[0] for e in found if e.is_dir(follow_symlinks=False))

    def walk(self) -> Iterator[FileStat | WalkProblem]:
        yield from walk_local(self._broot)

    def full(self, path: str, raw: bytes | None = None) -> bytes:
        return os.path.join(self._broot, raw or path.encode())

    def open(self, path: str, raw: bytes | None = None) -> BinaryIO:
        return open(self.full(path, raw), "rb")

    def stat(self, path: str, raw: bytes | None = None) -> tuple[int, int] | None:
        """(size, mtime_ns), or None if the file is gone."""
        try:
            st = os.stat(self.full(path, raw))
        except FileNotFoundError:
            return None
        return st.st_size, st.st_mtime_ns

    def hash(self, path: str, raw: bytes | None = None) -> str:
        from cloudvault.hashing import hash_file  # here: extract opens mirrors and never hashes through them

        return hash_file(self.full(path, raw))


# URL scheme -> (the module its fsspec backend imports, the cloudvault extra that installs it)
EXTRAS = {"ssh": ("paramiko", "ssh"), "sftp": ("paramiko", "ssh"), "s3": ("s3fs", "s3")}


def _require_extra(url: str) -> None:
    """A scheme whose backend is not installed is one line naming the pip install, before anything is reached."""
    import importlib.util

    scheme = url.split("://", 1)[0]
    if scheme in EXTRAS:
        module, extra = EXTRAS[scheme]
        try:
            found = importlib.util.find_spec(module) is not None
        except ValueError:  # a module set to None in sys.modules (as a test hides it)
            found = False
        if not found or (module in sys.modules and sys.modules[module] is None):
            from cloudvault.errors import ExtraMissing

            raise ExtraMissing(tool=module, why=f"for {scheme}:// mirrors", extra=extra)


class FsspecMirror:
    """A mirror behind an fsspec URL: `ssh://user@host:port/path` (sftp), `s3://bucket/prefix`, `memory://x`.

    Credentials come from the user's own setup (ssh keys and agent, AWS profile), never from the catalog.
    """

    remote = True

    def __init__(self, url: str) -> None:
        self.root = url
        _require_extra(url)
        import fsspec

        target = "sftp://" + url[len("ssh://") :] if url.startswith("ssh://") else url
        with self._reaching():
            self._fs, self._base = fsspec.core.url_to_fs(target)
        self._base = self._base.rstrip("/")

    @contextlib.contextmanager
    def _reaching(self, one_file: bool = False) -> Iterator[None]:
        """What the network or the storage library raises (refused connection, unknown host, no credentials,
        a missing backend) becomes one line naming the URL: these are the user's setup, not vault's bugs. For
        one file, an OSError stays what it is (that file is unreadable; the walk goes on)."""
        try:
            yield
        except FileNotFoundError:
            raise
        except Exception as exc:  # paramiko, botocore and fsspec each raise their own classes
            if one_file and isinstance(exc, OSError):
                raise
            detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise MirrorUnreachable(url=self.root, detail=f"{type(exc).__name__}: {detail}") from None

    def exists(self) -> bool:
        try:
            with self._reaching():
                return self._fs.isdir(self._base)
        except FileNotFoundError:
            return False

    def _abs(self, path: str) -> str:
        return f"{self._base}/{path}"

    def top_dirs(self) -> list[str]:
        with self._reaching():
            infos = self._fs.ls(self._base, detail=True)
        return sorted(i["name"].rstrip("/").rsplit("/", 1)[-1] for i in infos if i["type"] == "directory")

    def walk(self) -> Iterator[FileStat]:
        with self._reaching():
            found = self._fs.find(self._base, withdirs=False, detail=True)
        for name, info in sorted(found.items()):
            rel = name[len(self._base) :].lstrip("/")
            if rel:
                yield _file_stat(rel, info)

    def open(self, path: str, raw: bytes | None = None) -> BinaryIO:
        with self._reaching(one_file=True):
            return self._fs.open(self._abs(path), "rb", block_size=REMOTE_BLOCK)

    def stat(self, path: str, raw: bytes | None = None) -> tuple[int, int] | None:
        try:
            with self._reaching(one_file=True):
                info = self._fs.info(self._abs(path))
        except FileNotFoundError:
            return None
        return info["size"], _mtime_ns(info)

    def hash(self, path: str, raw: bytes | None = None) -> str:
        with self.open(path) as fh:
            from cloudvault.hashing import hash_stream

            return hash_stream(fh)


def _mtime_ns(info: dict) -> int:
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1e9)
        return int(float(value) * 1e9)
    return 0


def _file_stat(rel: str, info: dict) -> FileStat:
    mode = info.get("mode") or info.get("permissions") or (stat.S_IFREG | 0o644)
    kind = "symlink" if info.get("islink") or info.get("type") == "link" else "file"
    return FileStat(rel, None, kind, info.get("size") or 0, _mtime_ns(info), 0, 0, int(mode))


def require_mirror(mirror) -> None:
    if not mirror.exists():
        raise MirrorNotFound(root=mirror.root)


# -- walking a local directory ----------------------------------------------------------------------------
class WalkProblem(record("WalkProblem", "path detail")):
    """A directory or file the walk could not read; it becomes a flag, and the walk goes on."""

    __slots__ = ()


def text_path(raw: bytes) -> tuple[str, bytes | None]:
    """The UTF-8 text of a name, and its raw bytes when the text alone would lose them."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return raw.decode("utf-8", "backslashreplace"), raw


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
                yield _local_stat(root, rel, st)
        stack.extend(reversed(subdirs))


def _local_stat(root: bytes, rel: bytes, st: os.stat_result) -> FileStat:
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
