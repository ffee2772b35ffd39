"""An archive's member rows are written into its shard by a thread of their own while the scan goes on (sqlite3
lets the GIL go while it steps): the scanning thread makes no member-row call; the rows are the scan's records,
every field, in order; an error of the writing thread is raised in the scanning thread, not lost."""

from __future__ import annotations

import io
import sqlite3
import tarfile
import threading

import pytest
import zstandard

from cloudvault.archive.scan import ArchiveScan
from cloudvault.catalog import shards
from cloudvault.index import archives
from cloudvault.index.secrets import DEFAULT_RULES, SecretRules
from cloudvault.models import FileStat


@pytest.fixture
def archive(tmp_path):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(7000):
            data = b"step %d\n" % i * (i % 40)
            info = tarfile.TarInfo(f"logs/{i // 1000}/rank{i:05d}.log")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (tmp_path / "m").mkdir()
    path = tmp_path / "m/a.tar.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    stat = path.stat()
    return path, FileStat("a.tar.zst", None, "file", stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino,
                          0o644, None)  # fmt: skip


def test_member_rows_are_written_by_another_thread_and_are_the_scans_records(tmp_path, archive, monkeypatch):
    path, st = archive
    writers = []
    real = shards.add_member_batch
    monkeypatch.setattr(shards, "add_member_batch", lambda shard, batch: writers.append(
        threading.current_thread()) or real(shard, batch))  # fmt: skip
    shard = shards.open_shard(str(tmp_path / "s.db"))
    result = archives.scan_into(shard, str(tmp_path / "m"), st, SecretRules(dict(DEFAULT_RULES)))
    shards.finish_shard(shard)
    assert result.status == "ok" and result.member_count == 7000
    assert len(writers) >= 3 and threading.main_thread() not in writers
    with open(path, "rb") as fh:
        want = [tuple(r) for r in ArchiveScan(fh)]
    assert shard.execute(f"SELECT {shards.MEMBER_COLUMNS} FROM members ORDER BY rowid").fetchall() == want
    shard.close()


def test_an_error_of_the_writing_thread_is_raised_in_the_scanning_one(tmp_path, archive):
    """A shard that cannot grow (SQLite's own 'database or disk is full', as a full disk gives it) fails the scan
    with that error, where the caller (the CLI's one-line report) sees it."""
    _, st = archive
    shard = shards.open_shard(str(tmp_path / "s.db"))
    shard.execute("PRAGMA max_page_count = 20")
    before = set(threading.enumerate())  # other tests' threads may live on in this process
    with pytest.raises(sqlite3.OperationalError) as raised:
        archives.scan_into(shard, str(tmp_path / "m"), st, SecretRules(dict(DEFAULT_RULES)))
    assert raised.value.sqlite_errorname == "SQLITE_FULL"
    assert set(threading.enumerate()) <= before  # the writing thread (and the scan's) ended with the scan
    shard.close()
