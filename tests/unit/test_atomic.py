"""atomic_write: the bytes land whole under the final name or not at all (temp name beside it, fsync, rename, fsync of
the folder), and the temp file is written through the one descriptor that created it, the one that is fsynced."""

from __future__ import annotations

import builtins
import errno
import os
import stat

import pytest

from cloudvault import atomic
from cloudvault.atomic import TMP_MARK, atomic_write
from cloudvault.errors import DestinationExists, NoSpace, UsageError


def leftovers(folder) -> list[str]:
    return [name for name in os.listdir(folder) if TMP_MARK in name]


def test_the_bytes_appear_whole_with_the_mode_asked(tmp_path):
    final = tmp_path / "sub/out.bin"
    with atomic_write(str(final), mode=0o640) as fh:
        fh.write(b"abc")
        assert not final.exists()
    assert final.read_bytes() == b"abc" and stat.S_IMODE(final.stat().st_mode) == 0o640
    assert leftovers(final.parent) == []


def test_a_failure_inside_leaves_the_old_file_and_no_temp(tmp_path):
    final = tmp_path / "out.bin"
    final.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_write(str(final), force=True) as fh:
        fh.write(b"new, half")
        raise RuntimeError("stop")
    assert final.read_bytes() == b"old" and leftovers(tmp_path) == []


def test_an_existing_file_is_kept_without_force_and_a_folder_is_never_replaced(tmp_path):
    (tmp_path / "out.bin").write_bytes(b"old")
    with pytest.raises(DestinationExists), atomic_write(str(tmp_path / "out.bin")) as fh:
        fh.write(b"new")
    (tmp_path / "dir").mkdir()
    with pytest.raises(UsageError), atomic_write(str(tmp_path / "dir"), force=True) as fh:
        fh.write(b"new")
    assert (tmp_path / "out.bin").read_bytes() == b"old" and leftovers(tmp_path) == []


def test_a_full_disk_at_fsync_is_no_space_and_leaves_no_temp(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(NoSpace), atomic_write(str(tmp_path / "w/out.bin")) as fh:
        fh.write(b"abc")
    assert os.listdir(tmp_path / "w") == []


def test_the_temp_file_is_opened_once_and_that_descriptor_is_fsynced(tmp_path, monkeypatch):
    """Created exclusively, written, fsynced and closed through one descriptor: no second open that truncates it
    (on ext4, closing a file opened with O_TRUNC starts its writeback) and none just to fsync it."""
    opened, synced = [], []
    real_os_open, real_open, real_fsync = os.open, builtins.open, os.fsync

    def os_open(path, flags, *args, **kwargs):
        opened.append(os.fspath(path))
        return real_os_open(path, flags, *args, **kwargs)

    def py_open(file, *args, **kwargs):
        if not isinstance(file, int):
            opened.append(os.fspath(file))
        return real_open(file, *args, **kwargs)

    def fsync(fd):
        synced.append(os.fstat(fd).st_ino)
        return real_fsync(fd)

    monkeypatch.setattr(atomic.os, "open", os_open)
    monkeypatch.setattr(builtins, "open", py_open)
    monkeypatch.setattr(atomic.os, "fsync", fsync)
    final = tmp_path / "out.bin"
    with atomic_write(str(final)) as fh:
        fh.write(b"abc")
    temps = [path for path in opened if TMP_MARK in path]
    assert len(temps) == 1, opened
    assert synced[0] == final.stat().st_ino  # the file's own descriptor; then the folder's
    assert final.read_bytes() == b"abc"
