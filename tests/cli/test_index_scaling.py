"""`vault index --workers N`: however many cores an index runs on, the catalog it leaves is the same, row for row,
as a one-core index of the same mirror; and the budget it runs under is printed before it runs."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
import zstandard
from archives import compress, gnu_tar, make_tree
from conftest import require

from cloudvault.index.budget import PER_DECODER, WORKER_BASE, plan_budget

# every table a run writes, each row by what it is about (surrogate ids and the time of the run left out)
CATALOG_ROWS = {
    "entries": "SELECT entry_id, what, present FROM entries ORDER BY entry_id",
    "files": "SELECT path, raw_path, kind, size, mtime_ns, inode, mode, link_target, blake3 FROM files ORDER BY path",
    "archives": "SELECT f.path, a.status, a.raw_size, a.member_count, a.frame_count, a.list_status FROM archives a "
    "JOIN files f ON f.id = a.file_id ORDER BY f.path",
    "frames": "SELECT f.path, fr.idx, fr.comp_offset, fr.comp_size, fr.raw_offset, fr.raw_size FROM frames fr "
    "JOIN archives a ON a.id = fr.archive_id JOIN files f ON f.id = a.file_id ORDER BY f.path, fr.idx",
    "members": "SELECT f.path, m.path, m.raw_path, m.type, m.size, m.mode, m.mtime, m.uid, m.gid, m.uname, m.gname, "
    "m.link_target, m.header_offset, m.data_offset, m.blake3 FROM members m JOIN archives a ON a.id = m.archive_id "
    "JOIN files f ON f.id = a.file_id ORDER BY f.path, m.id",
    "flags": "SELECT f.path, fl.entry_id, fl.member, fl.kind, fl.detail FROM flags fl LEFT JOIN files f ON "
    "f.id = fl.file_id ORDER BY 1, 2, 3, 4, 5",
    "docs": "SELECT f.path, d.body FROM docs d JOIN files f ON f.id = d.file_id ORDER BY f.path",
    "member search": "SELECT f.path, m.path FROM members_fts JOIN members m ON m.id = members_fts.rowid JOIN "
    "archives a ON a.id = m.archive_id JOIN files f ON f.id = a.file_id WHERE members_fts MATCH 'log' ORDER BY 1, 2",
    "file search": "SELECT f.path FROM files_fts JOIN files f ON f.id = files_fts.rowid WHERE files_fts MATCH 'tar' "
    "ORDER BY 1",
}


def catalog_rows(db) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(db)
    try:
        return {table: conn.execute(sql).fetchall() for table, sql in CATALOG_ROWS.items()}
    finally:
        conn.close()


def many_frames(tar_path, out, frame: int) -> None:
    """The tar compressed as independent frames of `frame` raw bytes (as pzstd and seekable zstd make them)."""
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    data = tar_path.read_bytes()
    out.write_bytes(b"".join(cctx.compress(data[i : i + frame]) for i in range(0, len(data), frame)))


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """Archives of every shape a run meets: many small frames, pzstd's, one frame, damaged, beside plain files."""
    require("tar")
    require("pzstd")
    base = tmp_path_factory.mktemp("scaling")
    tar_path = base / "tree.tar"
    src = make_tree(base / "src", big=5 << 20)
    (src / "dumps/second.bin").write_bytes(os.urandom(3 << 20))  # members over a MiB are hashed on many threads
    gnu_tar(src, tar_path, "gnu")
    root = base / "mirror"
    for entry in ("018_train", "021_eval"):
        (root / entry).mkdir(parents=True)
    many_frames(tar_path, root / "018_train/frames_64k.tar.zst", 64 << 10)
    many_frames(tar_path, root / "018_train/frames_1m.tar.zst", 1 << 20)
    compress(tar_path, root / "021_eval/pzstd.tar.zst", "pzstd")
    compress(tar_path, root / "021_eval/one_frame.tar.zst", "zstd")
    whole = (root / "018_train/frames_64k.tar.zst").read_bytes()
    (root / "021_eval/cut.tar.zst").write_bytes(whole[: len(whole) * 2 // 3])  # ends inside a frame
    (root / "021_eval/notes.txt").write_text("eval notes\n")
    return root


def index(vault, db, root, workers: int) -> dict[str, list[tuple]]:
    result = vault("--catalog", str(db), "index", "-q", "--workers", str(workers), str(root))
    assert result.code == 5, result.err  # the cut archive is flagged as damaged, on any number of cores
    return catalog_rows(db)


@pytest.mark.parametrize("workers", [2, 3, 8])
def test_a_mirror_indexed_on_many_cores_gives_the_one_core_catalog_row_for_row(mirror, tmp_path, vault, workers):
    one_core = index(vault, tmp_path / "one.db", mirror, 1)
    assert len(one_core["archives"]) == 5 and len(one_core["frames"]) > 100
    assert index(vault, tmp_path / "many.db", mirror, workers) == one_core


@pytest.mark.parametrize("workers", [4, 16])
def test_one_multi_frame_archive_decoded_on_every_core_gives_the_one_core_rows(mirror, tmp_path, vault, workers):
    alone = tmp_path / "alone"
    (alone / "018_train").mkdir(parents=True)
    os.link(mirror / "018_train/frames_64k.tar.zst", alone / "018_train/frames_64k.tar.zst")
    one_core = index_ok(vault, tmp_path / "one.db", alone, 1)
    assert index_ok(vault, tmp_path / "all.db", alone, workers) == one_core
    assert len(one_core["frames"]) > 50 and any(m[4] > 1 << 20 for m in one_core["members"])


def index_ok(vault, db, root, workers: int) -> dict[str, list[tuple]]:
    result = vault("--catalog", str(db), "index", "-q", "--workers", str(workers), str(root))
    assert result.code == 0, result.err
    return catalog_rows(db)


def test_the_budget_uses_every_core_unless_memory_is_short():
    assert plan_budget(None, present=16, memory=64 << 30).cores == 16
    short = plan_budget(None, present=16, memory=4 * (WORKER_BASE + PER_DECODER))
    assert short.cores == 3 and short.bounded_by_memory  # three quarters of the memory: three workers
    asked = plan_budget(6, present=16, memory=1 << 20)
    assert asked.cores == 6 and not asked.bounded_by_memory


def test_cores_are_shared_between_processes_and_the_archives_left():
    budget = plan_budget(16, present=16, memory=64 << 30)
    assert (budget.processes(32), budget.decoders(32)) == (16, 1)  # many archives: one core each
    assert (budget.processes(1), budget.decoders(1)) == (1, 16)  # one archive: all cores on its frames
    assert budget.decoders(3) == 5  # the last archives of a run take the cores the finished ones left
    assert budget.worker_memory(1) == WORKER_BASE + 16 * PER_DECODER


def test_dry_run_prints_each_workers_budget_and_reads_nothing(tmp_path, vault):
    db = tmp_path / "c.db"
    result = vault("--catalog", str(db), "index", "--dry-run", "--workers", "4", "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    shares = (doc["cores"], doc["processes"], doc["decoders_per_archive"], doc["decoders_for_one_archive"])
    assert shares == (4, 4, 1, 4)
    assert doc["worker_memory"] == WORKER_BASE + PER_DECODER
    assert not db.exists()
    text = vault("--catalog", str(db), "index", "--dry-run", "--workers", "4")
    assert "4 worker processes" in text.out and "one archive left: 4 decoding threads" in text.out
