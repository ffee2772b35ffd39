"""Mirrors behind URLs: fsspec's memory filesystem, indexed and read by ranges. (A real sshd and a local S3 server
are tests/integration/test_remote.py.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import fsspec
import pytest
from archives import compress, gnu_tar
from conftest import require

from cloudvault.tools.mirrorfs import FsspecMirror


@pytest.fixture
def counted_reads(monkeypatch):
    """Bytes read through remote file objects, to show that extraction reads only the frames it needs."""
    counter = {"bytes": 0}
    original = FsspecMirror.open

    def open_counted(self, path, raw=None):
        fh = original(self, path, raw)
        if getattr(fh, "counted", False):  # fsspec's memory:// hands out one file object per path: wrapped once
            return fh
        fh.counted = True
        read = fh.read

        def counting_read(n=-1):
            data = read(n)
            counter["bytes"] += len(data)
            return data

        fh.read = counting_read
        return fh

    monkeypatch.setattr(FsspecMirror, "open", open_counted)
    return counter


def _multiframe_archive(tmp_path: Path) -> tuple[Path, Path]:
    require("pzstd")
    src = tmp_path / "src"
    (src / "dumps").mkdir(parents=True)
    for i in range(6):
        (src / f"dumps/part{i}.bin").write_bytes(os.urandom(5 << 20))
    (src / "dumps/last.json").write_text('{"end": true}\n')
    gnu_tar(src, tmp_path / "a.tar", "gnu")
    return compress(tmp_path / "a.tar", tmp_path / "a.tar.zst", "pzstd"), src


def _late_member(db: str) -> tuple[str, int, int]:
    """The file member stored last in the archive, the index of the frame holding its first byte, and the
    number of frames: a member that only the frame table reaches cheaply."""
    import sqlite3

    conn = sqlite3.connect(db)
    path, offset = conn.execute(
        "SELECT path, data_offset FROM members WHERE type = 'file' AND size > 0 ORDER BY data_offset DESC LIMIT 1"
    ).fetchone()
    frames = [r[0] for r in conn.execute("SELECT raw_offset FROM frames ORDER BY idx")]
    return path, max(i for i, raw in enumerate(frames) if raw <= offset), len(frames)


def test_memory_url_mirror_is_indexed_and_extracted_by_ranges(tmp_path, vault, counted_reads):
    archive, src = _multiframe_archive(tmp_path)
    fs = fsspec.filesystem("memory")
    base = f"/vault-test-{os.getpid()}-{time.monotonic_ns()}"
    fs.pipe(f"{base}/018_remote/data/a.tar.zst", archive.read_bytes())
    fs.pipe(f"{base}/018_remote/ENVIRONMENT.md", b"# remote granite box\n")
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", "--json", f"memory://{base}")
    assert r.code == 0, r.err
    assert json.loads(r.out)["members_indexed"] >= 8
    assert "018_remote" in vault("--catalog", db, "search", "granite").out
    member, frame, frames = _late_member(db)
    assert frame >= frames - 2 >= 2
    counted_reads["bytes"] = 0
    out = tmp_path / "out"
    assert vault("--catalog", db, "extract", "018", member, "-o", str(out)).code == 0
    assert (out / member.rsplit("/", 1)[-1]).read_bytes() == (src / member).read_bytes()
    assert counted_reads["bytes"] < archive.stat().st_size / 2  # the covering frames, not the archive
    assert vault("--catalog", db, "verify", "018").code == 0
    fs.pipe(f"{base}/018_remote/ENVIRONMENT.md", b"# changed\n")
    assert vault("--catalog", db, "verify", "018").code == 5
    fs.rm(base, recursive=True)
