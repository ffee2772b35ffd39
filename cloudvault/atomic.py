"""Everything vault writes lands whole or not at all: temp name in the destination folder, fsync, rename, fsync."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from typing import BinaryIO

from cloudvault.errors import DestinationExists, NoSpace, UsageError

TMP_MARK = ".vault-"
# Paths are handled as str here, never through pathlib (`vault extract` would pay for importing it); a function
# given a Path hands back a Path, given a str a str.


def temp_name(final: str | os.PathLike) -> str | os.PathLike:
    """The temp name beside final: hidden, marked as vault's and by pid, so a later run can tell it is stale."""
    folder, name = os.path.split(os.fspath(final))
    tmp = os.path.join(folder, f".{name}{TMP_MARK}{os.getpid()}.tmp")
    return tmp if isinstance(final, str) else type(final)(tmp)


def is_stale_temp(path: str | os.PathLike) -> bool:
    """A temp file vault left behind (killed mid-write) whose writer is gone: safe for vault to remove."""
    name = os.path.basename(path)
    if not (name.startswith(".") and TMP_MARK in name and name.endswith(".tmp")):
        return False
    pid_text = name.rsplit(TMP_MARK, 1)[1][: -len(".tmp")]
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    return pid != os.getpid() and process_gone(pid)


def process_gone(pid: int) -> bool:
    """No process has this pid any more (one owned by another user still counts as there)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def fsync_dir(folder: str | os.PathLike) -> None:
    """Make a rename in folder durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(folder: str | os.PathLike) -> None:
    """Every dirty page of the file system holding folder on disk (syncfs(2)), not the whole machine's (sync(2));
    os.sync() where the C library has no syncfs."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if not hasattr(libc, "syncfs"):
            os.sync()
        elif libc.syncfs(fd) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno), os.fspath(folder))
    finally:
        os.close(fd)


def commit(tmp: str | os.PathLike, final: str | os.PathLike) -> None:
    """fsync tmp, rename it over final, fsync the folder."""
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, final)
    fsync_dir(os.path.dirname(os.fspath(final)) or ".")


def _unlink_if_there(path: str | os.PathLike) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _temp_beside(final: str | os.PathLike, force: bool) -> str | os.PathLike:
    """The temp name beside final, its folder made and a stale temp of this pid removed; final existing is
    DestinationExists unless force, and a folder is never replaced."""
    if os.path.isdir(final) and not os.path.islink(final):
        raise UsageError(detail=f"{final} is a folder; vault never replaces a folder with a file")
    if os.path.lexists(final) and not force:
        raise DestinationExists(path=final)
    os.makedirs(os.path.dirname(os.fspath(final)) or ".", exist_ok=True)
    tmp = temp_name(final)
    _unlink_if_there(tmp)
    return tmp


@contextlib.contextmanager
def _removed_on_failure(tmp: str | os.PathLike, final: str | os.PathLike) -> Iterator[None]:
    """The temp file removed if the block fails; a full disk or quota is NoSpace, naming final."""
    try:
        yield
    except OSError as exc:
        _unlink_if_there(tmp)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise NoSpace(path=final) from None
        raise
    except BaseException:
        _unlink_if_there(tmp)
        raise


def _create(tmp: str | os.PathLike, mode: int) -> int:
    return os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)


@contextlib.contextmanager
def atomic_path(final: str | os.PathLike, *, force: bool = False, mode: int = 0o600) -> Iterator[str | os.PathLike]:
    """A temp path beside final to fill (created empty with mode); renamed onto final when the block ends
    without error, removed when it does not. final existing is DestinationExists unless force."""
    tmp = _temp_beside(final, force)
    os.close(_create(tmp, mode))
    with _removed_on_failure(tmp, final):
        yield tmp
        commit(tmp, final)


@contextlib.contextmanager
def atomic_write(final: str | os.PathLike, *, force: bool = False, mode: int = 0o600) -> Iterator[BinaryIO]:
    """An open binary file to write final's bytes into; final appears, whole, only if the block succeeds. The temp
    file is created, written and fsynced through one descriptor (no second open to truncate it, whose close
    starts a writeback on ext4, nor a third to fsync it)."""
    tmp = _temp_beside(final, force)
    fd = _create(tmp, mode)
    with _removed_on_failure(tmp, final):
        with open(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fd)
        os.replace(tmp, final)
        fsync_dir(os.path.dirname(os.fspath(final)) or ".")


def write_text(final: str | os.PathLike, text: str, *, force: bool = True, mode: int = 0o644) -> None:
    """A small text file (a report, a table, a script) written whole or not at all, as UTF-8."""
    with atomic_write(final, force=force, mode=mode) as fh:
        fh.write(text.encode("utf-8"))
