"""Members as `vault index` records them and `vault search` finds them, against tarfile's view of the archive: every
member a row with its BLAKE3, every row in the search index, after an index, an index interrupted inside an
archive's transaction and run again, a re-index that removes members and `vault index --accept`."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import blake3
import pytest
from archives import flip_byte
from conftest import require

TERMS = ("rank0001", "0042", "json", "run07/", "metrics")


def _small_members_tar(path: Path, names: list[str], seed: int = 1) -> None:
    """A GNU tar (tarfile) of small logs and json under the given names, zstd-compressed to path."""
    require("zstd")
    raw = path.with_suffix("")
    with tarfile.open(raw, "w", format=tarfile.GNU_FORMAT) as tar:
        for i, name in enumerate(names):
            data = (f"step={i} seed={seed} loss={i * 0.001:.4f}\n" * (1 + (i * 7) % 90)).encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_760_000_000 + i, 0o644
            tar.addfile(info, io.BytesIO(data))
    subprocess.run(["zstd", "-q", "-f", "--rm", str(raw), "-o", str(path)], check=True)


def _names(count: int, prefix: str = "runs") -> list[str]:
    return [f"{prefix}/run{i // 100:02d}/{'metrics' if i % 3 == 0 else 'rank'}{i:05d}.{'json' if i % 2 else 'log'}"
            for i in range(count)]  # fmt: skip


def _tarfile_view(archive: Path) -> dict[str, tuple]:
    """path -> (size, mtime, header offset, data offset, BLAKE3 of its bytes), as tarfile reads the archive."""
    import zstandard

    raw = zstandard.ZstdDecompressor().decompressobj().decompress(archive.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return {m.name: (m.size, m.mtime, m.offset, m.offset_data, blake3.blake3(tar.extractfile(m).read()).hexdigest())
                for m in tar.getmembers()}  # fmt: skip


def _recorded(db: Path) -> dict[str, tuple]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT path, size, mtime, header_offset, data_offset, blake3 FROM members")
        return {path: tuple(rest) for path, *rest in rows}
    finally:
        conn.close()


def _search(vault, db: Path, term: str) -> set[str]:
    r = vault("--catalog", str(db), "search", term, "--kind", "member", "--limit", "0", "--json")
    assert r.code in (0, 1), r.err
    return {hit["path"] for hit in json.loads(r.out)["results"]}


def _assert_search_matches_rows(vault, db: Path, expected: set[str]) -> None:
    """The search index holds exactly the member rows (FTS5's own check, rank 1: the index against its content
    table), and a search for each term finds every member whose path holds it, no other."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("INSERT INTO members_fts(members_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()
    for term in TERMS:
        assert _search(vault, db, term) == {p for p in expected if term.lower() in p.lower()}, term


def test_every_member_is_a_row_as_tarfile_reads_it_and_found_by_search(tmp_path, vault):
    archive = tmp_path / "m/018_runs/logs.tar.zst"
    archive.parent.mkdir(parents=True)
    _small_members_tar(archive, _names(1500))
    db = tmp_path / "c.db"
    r = vault("--catalog", str(db), "index", "-q", str(tmp_path / "m"))
    assert r.code == 0, r.err
    view = _tarfile_view(archive)
    assert _recorded(db) == view and len(view) == 1500
    _assert_search_matches_rows(vault, db, set(view))


# The indexer, stopped inside an archive's transaction: the member rows written, the catalog not committed. Where
# the search index is built in its own step after the rows (build_member_search), there; else (a trigger per row)
# once the rows are in.
INSIDE_COMMIT_INDEXER = """
import sys, time
from cloudvault.catalog import files
name = "build_member_search" if hasattr(files, "build_member_search") else "insert_members"
step = getattr(files, name)
calls = []
def step_then_pause(*args, **kwargs):
    calls.append(1)
    if len(calls) == 2 and name == "build_member_search":
        print("inside commit", flush=True)
        time.sleep(60)
    step(*args, **kwargs)
    if len(calls) == 2:
        print("inside commit", flush=True)
        time.sleep(60)
setattr(files, name, step_then_pause)
from cloudvault.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_search_is_right_after_an_index_stopped_inside_an_archive_s_commit_and_run_again(tmp_path, vault, sig):
    mirror = tmp_path / "m"
    for i in range(3):
        (mirror / f"{18 + i:03d}_runs").mkdir(parents=True)
        _small_members_tar(mirror / f"{18 + i:03d}_runs/logs.tar.zst", _names(400, f"part{i}"), seed=i)
    db = tmp_path / "c.db"
    args = ["--catalog", str(db), "index", "--workers", "1", "-q", str(mirror)]
    proc = subprocess.Popen([sys.executable, "-c", INSIDE_COMMIT_INDEXER, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        first = proc.stdout.readline()
    finally:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    assert first == "inside commit\n", f"the child never reached its second archive's commit; its stderr:\n{err}"
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM archives").fetchone()[0] == 1  # the second one rolled back whole
    conn.close()
    _assert_search_matches_rows(vault, db, set(_recorded(db)))
    r = vault(*args)
    assert r.code == 0, r.err
    expected = set().union(*(_tarfile_view(a) for a in mirror.glob("*/logs.tar.zst")))
    assert set(_recorded(db)) == expected and len(expected) == 1200
    _assert_search_matches_rows(vault, db, expected)


def test_search_forgets_members_a_reindexed_or_removed_archive_no_longer_holds(tmp_path, vault):
    mirror = tmp_path / "m"
    (mirror / "018_runs").mkdir(parents=True)
    (mirror / "019_runs").mkdir(parents=True)
    changing, removed = mirror / "018_runs/logs.tar.zst", mirror / "019_runs/old.tar.zst"
    _small_members_tar(changing, _names(600))
    _small_members_tar(removed, _names(300, "old"))
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(mirror)).code == 0
    _assert_search_matches_rows(vault, db, set(_recorded(db)))
    _small_members_tar(changing, _names(250, "kept"), seed=5)  # a new version: fewer members, other names
    os.utime(changing, (1_700_000_000, 1_700_000_000))
    removed.unlink()
    r = vault("--catalog", str(db), "index", "-q", str(mirror))
    assert r.code == 0, r.err
    view = _tarfile_view(changing)
    assert _recorded(db) == view
    _assert_search_matches_rows(vault, db, set(view))
    assert _search(vault, db, "old/") == set() and _search(vault, db, "runs/run05") == set()


def test_search_finds_the_accepted_version_s_members_and_not_the_recorded_ones(tmp_path, vault):
    """An archive changed in place keeps its recorded members (and their search rows) until `--accept` takes
    the new bytes: then the new version's members, and only they, are found."""
    mirror = tmp_path / "m"
    (mirror / "018_runs").mkdir(parents=True)
    archive = mirror / "018_runs/logs.tar.zst"
    _small_members_tar(archive, _names(500))
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(mirror)).code == 0
    recorded = set(_recorded(db))
    flip_byte(archive, archive.stat().st_size // 2)  # same size and mtime, other bytes
    r = vault("--catalog", str(db), "index", "-q", str(mirror))
    assert r.code == 5, r.out + r.err
    assert set(_recorded(db)) == recorded
    _assert_search_matches_rows(vault, db, recorded)
    _small_members_tar(archive, _names(320, "accepted"), seed=9)
    r = vault("--catalog", str(db), "index", "-q", "--accept", str(archive), str(mirror))
    assert r.code == 0, r.out + r.err
    view = _tarfile_view(archive)
    assert _recorded(db) == view
    _assert_search_matches_rows(vault, db, set(view))
    assert _search(vault, db, "runs/run01") == set()
