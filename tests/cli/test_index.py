"""The indexer as a user meets it: incremental, crash-safe, exclusive, and loud about damage and secrets."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from archives import compress, gnu_tar, hostile_archive
from conftest import require

from cloudvault.catalog.db import SCHEMA_VERSION
from cloudvault.demo.build import FAKE_TOKEN


def _mirror_with_archives(root: Path, n: int, size_mb: int) -> Path:
    require("zstd")
    for i in range(n):
        src = root.parent / f"src{i}"
        (src / "dumps").mkdir(parents=True)
        (src / "dumps/data.bin").write_bytes(os.urandom(size_mb << 20))
        (src / "log.txt").write_text(f"archive {i}\n")
        entry = root / f"{18 + i % 3:03d}_e"
        entry.mkdir(parents=True, exist_ok=True)
        gnu_tar(src, root.parent / f"a{i}.tar", "gnu")
        compress(root.parent / f"a{i}.tar", entry / f"part{i:02d}.tar.zst", "zstd")
    return root


def _count(db: Path, table: str) -> int:
    return sqlite3.connect(db).execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_second_run_reads_nothing_then_picks_up_changes_and_deletions(demo_mirror, tmp_path, vault):
    mirror = tmp_path / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    db = tmp_path / "c.db"
    first = vault("--catalog", str(db), "index", "--json", str(mirror))
    assert first.code == 0
    import json

    one = json.loads(first.out)
    assert one["files_read"] == one["files_seen"] > 50 and one["members_indexed"] > 50
    two = json.loads(vault("--catalog", str(db), "index", "--json", str(mirror)).out)
    assert two["files_read"] == 0 and two["files_unchanged"] == one["files_seen"]
    assert two["seconds"] < one["seconds"] / 3
    (mirror / "004_granite_30b_batch_sweep/data/_cells_summary.csv").write_text("arm,batch,tps\nnew,1,2\n")
    archive = next(mirror.glob("019_*/data/score_block_n82.tar.zst"))
    archive.unlink()
    three = json.loads(vault("--catalog", str(db), "index", "--json", str(mirror)).out)
    assert three["files_read"] == 1 and three["files_deleted"] == 1
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM files WHERE path LIKE '%score_block_n82.tar.zst'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM members WHERE path LIKE '%score_scores%'").fetchone()[0] == 0
    assert vault("--catalog", str(db), "search", "score_scores").code == 1
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.execute("INSERT INTO members_fts(members_fts) VALUES('integrity-check')")


# The indexer, with a pause after each committed archive: Ctrl-C lands at a known point, every run.
PAUSING_INDEXER = """
import sys, time
import cloudvault.index.archives as archives
commit = archives.commit_archive
def commit_then_pause(*args, **kwargs):
    commit(*args, **kwargs)
    print("committed", flush=True)
    time.sleep(60)
archives.commit_archive = commit_then_pause
from cloudvault.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _signal_when_paused(script: str, args: list[str], sig: int) -> tuple[subprocess.Popen, str, str]:
    """Run an indexer script that prints one line at its pause point, then send it sig there; (process, the
    line it printed, its stderr)."""
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        first = proc.stdout.readline()
    finally:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    return proc, first, err


def test_kill_9_mid_index_leaves_a_consistent_catalog_and_the_next_run_finishes(tmp_path):
    mirror = _mirror_with_archives(tmp_path / "m", 6, 12)
    db = tmp_path / "c.db"
    args = ["--catalog", str(db), "index", "--workers", "1", "-q", str(mirror)]
    proc, first, err = _signal_when_paused(MID_ARCHIVE_INDEXER, args, signal.SIGKILL)
    assert first == "inside archive 2\n", f"the child never reached its second archive; its stderr:\n{err}"
    assert _count(db, "archives") == 1 and list(tmp_path.glob(".c.db.shards-*"))  # killed with a shard open
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # every archive present is complete: its member count matches its rows
    for archive_id, count in conn.execute("SELECT id, member_count FROM archives"):
        assert conn.execute("SELECT count(*) FROM members WHERE archive_id = ?", (archive_id,)).fetchone()[0] == count
    done = subprocess.run([sys.executable, "-m", "cloudvault", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _count(db, "archives") == 6
    assert not list(tmp_path.glob(".c.db.shards-*"))


# The indexer, paused inside its second archive with members already in the shard: kill -9 lands mid-archive.
MID_ARCHIVE_INDEXER = """
import sys, time
import cloudvault.catalog.shards as shards
add = shards.MemberRows.add_all  # the member rows, handed to the thread that writes them into the shard
calls = []
def add_then_pause(rows, records):
    calls.append(1)
    if len(calls) < 2:
        return add(rows, records)
    add(rows, [next(iter(records))])
    time.sleep(0.5)  # the writing thread has put it in the shard
    print("inside archive 2", flush=True)
    time.sleep(60)
shards.MemberRows.add_all = add_then_pause
from cloudvault.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_exits_130_and_keeps_committed_archives(tmp_path):
    mirror = _mirror_with_archives(tmp_path / "m", 3, 1)
    db = tmp_path / "c.db"
    args = ["--catalog", str(db), "index", "--workers", "1", "-q", str(mirror)]
    proc, first, err = _signal_when_paused(PAUSING_INDEXER, args, signal.SIGINT)
    assert first == "committed\n", f"the child never committed an archive; its stderr:\n{err}"
    assert proc.returncode == 130, f"exit {proc.returncode}; the child's stderr:\n{err}"
    assert "interrupted" in err and "Traceback" not in err, err
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert _count(db, "archives") == 1  # the one committed before Ctrl-C is kept
    done = subprocess.run([sys.executable, "-m", "cloudvault", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _count(db, "archives") == 3


def test_a_second_indexer_refuses_with_a_clear_message_or_waits(tmp_path):
    import fcntl
    import threading

    mirror = _mirror_with_archives(tmp_path / "m", 2, 1)
    db = tmp_path / "c.db"
    base = [sys.executable, "-m", "cloudvault", "--catalog", str(db), "index", "-q", str(mirror)]
    holder = subprocess.Popen([*base[:-2], "-q", str(mirror)])  # a real indexer, to compete below
    holder.wait()
    fd = os.open(db.with_name("c.db.lock"), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a running indexer holds it
    os.ftruncate(fd, 0)
    os.pwrite(fd, b"4242", 0)
    refused = subprocess.run(base, capture_output=True, text=True)
    assert refused.returncode == 6
    assert "another `vault index` (pid 4242)" in refused.stderr and "--wait" in refused.stderr
    threading.Timer(1.0, os.close, (fd,)).start()
    started = time.monotonic()
    waited = subprocess.run([*base, "--wait"], capture_output=True, text=True)
    assert waited.returncode == 0 and time.monotonic() - started >= 0.9


def test_two_indexers_started_together_never_corrupt_the_catalog(tmp_path):
    mirror = _mirror_with_archives(tmp_path / "m", 4, 8)
    db = tmp_path / "c.db"
    base = [sys.executable, "-m", "cloudvault", "--catalog", str(db), "index", "-q", str(mirror)]
    procs = [subprocess.Popen(base, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    codes = sorted(p.wait() for p in procs)
    assert codes in ([0, 0], [0, 6])
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert _count(db, "archives") == 4 and _count(db, "members") == 16


def test_truncated_bitflipped_and_non_tar_archives_are_flagged_and_the_walk_goes_on(tmp_path, vault):
    mirror = _mirror_with_archives(tmp_path / "m", 3, 2)
    good = sorted(mirror.rglob("*.tar.zst"))
    data = good[1].read_bytes()
    good[1].write_bytes(data[: len(data) // 2])  # truncated
    flipped = bytearray(good[2].read_bytes())
    flipped[len(flipped) // 2] ^= 0x40
    good[2].write_bytes(bytes(flipped))
    (mirror / "018_e/plain.tar.zst").write_bytes(b"this is not zstd at all" * 10)
    src = tmp_path / "notar.txt"
    src.write_bytes(b"hello, not a tar\n" * 100)
    compress(src, mirror / "018_e/notar.tar.zst", "zstd")
    db = tmp_path / "c.db"
    result = vault("--catalog", str(db), "index", str(mirror))
    assert result.code == 5
    conn = sqlite3.connect(db)
    status = dict(conn.execute("SELECT f.path, a.status FROM archives a JOIN files f ON f.id = a.file_id"))
    assert status[str(good[0].relative_to(mirror))] == "ok"
    assert status[str(good[1].relative_to(mirror))] == "truncated"
    assert status[str(good[2].relative_to(mirror))] in ("corrupt_frame", "corrupt_header")
    assert status["018_e/plain.tar.zst"] == "not_zstd"
    assert status["018_e/notar.tar.zst"] == "not_tar"
    kinds = {k for (k,) in conn.execute("SELECT kind FROM flags")}
    assert {"truncated", "not_zstd", "not_tar"} <= kinds
    assert "flagged" in result.out


def test_unreadable_file_is_flagged_not_fatal(monkeypatch):
    import tempfile

    from cloudvault.catalog.db import open_catalog
    from cloudvault.index.roots import resolve_root
    from cloudvault.index.run import IndexOptions, index_mirrors

    tmp_path = Path(tempfile.mkdtemp(prefix="vault-unreadable-"))  # outside pytest's 0700 tree
    mirror = tmp_path / "m"
    (mirror / "001_x").mkdir(parents=True)
    (mirror / "001_x/ok.txt").write_text("fine\n")
    locked = mirror / "001_x/locked.txt"
    locked.write_text("no\n")
    locked.chmod(0)
    db = tmp_path / "cat" / "c.db"
    db.parent.mkdir()
    state = tmp_path / "state"  # the mirror registry, writable by the user the index runs as
    state.mkdir()
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    as_root = os.geteuid() == 0
    if as_root:  # root reads anything: act as nobody so the permission bits count
        for p in (tmp_path, db.parent, state, mirror, mirror / "001_x"):
            p.chmod(0o777)
        os.seteuid(65534)
    try:
        conn = open_catalog(db, create=True)
        report = index_mirrors(conn, [resolve_root(str(mirror), None)], IndexOptions(workers=1))
    finally:
        if as_root:
            os.seteuid(0)
        shutil.rmtree(tmp_path, ignore_errors=True)
    assert report.damaged and report.flags == {"unreadable": 1}
    flags = conn.execute("SELECT f.path, fl.kind FROM flags fl JOIN files f ON f.id = fl.file_id").fetchall()
    assert flags == [("001_x/locked.txt", "unreadable")]
    assert conn.execute("SELECT blake3 FROM files WHERE path = '001_x/ok.txt'").fetchone()[0]


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_names_the_catalog_write_after_an_archives_bytes_are_read(tmp_path, workers):
    """Once an archive's bytes are all read, its members still have to go into the catalog and the search index
    (seconds for 300k members): the progress line says so, with the count, instead of sitting silent at 100%."""
    from cloudvault.catalog.db import open_catalog
    from cloudvault.index.roots import resolve_root
    from cloudvault.index.run import IndexOptions, index_mirrors
    from cloudvault.progress import Progress

    class Recorder(Progress):
        def __init__(self):
            self.total, self.done, self.events = 0, 0, []

        def start(self, total_bytes, total_files):
            self.total = total_bytes

        def advance(self, nbytes):
            self.done += nbytes

        def phase(self, what):
            self.events.append((self.done, what))

    mirror = _mirror_with_archives(tmp_path / "m", 2, 1)
    conn = open_catalog(tmp_path / "c.db", create=True)
    progress = Recorder()
    index_mirrors(conn, [resolve_root(str(mirror), None)], IndexOptions(workers=workers), progress)
    members = dict(conn.execute("SELECT f.path, a.member_count FROM archives a JOIN files f ON f.id = a.file_id"))
    conn.close()
    assert sorted(what for _, what in progress.events) == sorted(
        f"writing {n} members to the catalog and search index: {path}" for path, n in members.items()
    )
    archive_bytes = sum(p.stat().st_size for p in mirror.rglob("*.tar.zst"))
    last_done, _ = progress.events[-1]
    assert last_done >= archive_bytes  # the last archive's write is shown after its bytes were counted


def test_secret_is_flagged_on_member_and_entry_and_never_stored_or_printed(demo_catalog, vault):
    raw = demo_catalog.read_bytes()
    for suffix in ("-wal", "-shm"):
        extra = demo_catalog.with_name(demo_catalog.name + suffix)
        if extra.exists():
            raw += extra.read_bytes()
    assert FAKE_TOKEN.encode() not in raw
    conn = sqlite3.connect(demo_catalog)
    rows = conn.execute("SELECT entry_id, member, detail FROM flags WHERE kind = 'secret'").fetchall()
    assert ("019_aicluster_dump_debugger", "logs/saturate_env.log") in [(e, m) for e, m, _ in rows]
    assert all(FAKE_TOKEN not in d for *_, d in rows)
    shown = vault("--catalog", str(demo_catalog), "show", "019")
    assert "never share externally" in shown.out and "secret" in shown.out
    assert FAKE_TOKEN not in shown.out
    found = vault("--catalog", str(demo_catalog), "search", "saturate_env")
    assert "never share externally" in found.out and FAKE_TOKEN not in found.out


def test_listing_mismatch_is_a_flag(tmp_path, vault):
    mirror = _mirror_with_archives(tmp_path / "m", 1, 1)
    archive = next(mirror.rglob("*.tar.zst"))
    Path(str(archive) + ".list").write_text("./\n./log.txt\n./dumps/\n./dumps/data.bin\n./missing.txt\n")
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(mirror)).code == 5
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT list_status FROM archives").fetchone()[0] == "mismatch"
    assert "missing.txt" in conn.execute("SELECT detail FROM flags WHERE kind = 'list_mismatch'").fetchone()[0]
    Path(str(archive) + ".list").write_text("./\n./log.txt\n./dumps/\n./dumps/data.bin\n")
    assert vault("--catalog", str(db), "index", "-q", str(mirror)).code == 0
    assert conn.execute("SELECT list_status FROM archives").fetchone()[0] == "match"


def test_unsafe_member_paths_are_recorded_and_flagged(tmp_path, vault):
    links = (("passwd_link", "/etc/passwd", tarfile.SYMTYPE),)
    hostile_archive(tmp_path / "m/019_x/hostile.tar.zst", ("../escape.txt", "/etc/evil.txt", "ok.txt"), links)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 5
    conn = sqlite3.connect(db)
    flagged = {m for (m,) in conn.execute("SELECT member FROM flags WHERE kind = 'unsafe_member'")}
    assert flagged == {"../escape.txt", "/etc/evil.txt", "passwd_link"}
    assert {p for (p,) in conn.execute("SELECT path FROM members")} >= {"../escape.txt", "/etc/evil.txt"}


@pytest.mark.parametrize("workers", ["1", "2"])
def test_workers_give_the_same_catalog(tmp_path, vault, workers):
    mirror = _mirror_with_archives(tmp_path / "m", 4, 1)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", "--workers", workers, str(mirror)).code == 0
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT f.path, m.path, m.blake3 FROM members m JOIN archives a ON a.id = m.archive_id "
        "JOIN files f ON f.id = a.file_id ORDER BY 1, 2"
    ).fetchall()
    assert len(rows) == 4 * 4
    assert len({r[2] for r in rows if r[1] == "dumps/data.bin"}) == 4


def test_catalog_file_is_private_and_the_mirror_untouched(demo_mirror, tmp_path, vault):
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in demo_mirror.rglob("*")}
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(demo_mirror)).code == 0
    assert (db.stat().st_mode & 0o777) == 0o600
    after = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in demo_mirror.rglob("*")}
    assert before == after


def test_a_root_keeps_its_mirror_name_and_two_roots_never_share_one(demo_mirror, tmp_path, vault):
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", "--mirror", "marvell_cloud", str(demo_mirror)).code == 0
    assert vault("--catalog", db, "index", "-q", str(demo_mirror)).code == 0  # same root, plain path
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT name FROM mirrors").fetchall() == [("marvell_cloud",)]
    assert vault("--catalog", db, "show", "019").code == 0
    other = tmp_path / "elsewhere" / demo_mirror.name
    (other / "030_new").mkdir(parents=True)
    (other / "030_new/notes.txt").write_text("another mirror, same folder name\n")
    assert vault("--catalog", db, "index", "-q", str(other)).code == 0
    names = [n for (n,) in conn.execute("SELECT name FROM mirrors ORDER BY id")]
    assert names == ["marvell_cloud", "Marvell_cloud"] or len(set(names)) == 2
    assert conn.execute("SELECT count(DISTINCT root) FROM mirrors").fetchone()[0] == 2
    assert vault("--catalog", db, "index", "-q").code == 0  # both known roots again, nothing mixed
    assert conn.execute("SELECT count(*) FROM files WHERE path = '030_new/notes.txt'").fetchone()[0] == 1


def test_a_subfolder_or_parent_of_a_known_mirror_is_refused_naming_the_mirror_to_reindex(demo_mirror, tmp_path, vault):
    mirror = tmp_path / "shelf" / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", "--mirror", "marvell_cloud", str(mirror)).code == 0
    before = sqlite3.connect(db).execute("SELECT count(*) FROM files").fetchone()[0]
    sub = next(mirror.glob("019_*"))
    for path, says in ((sub, "is inside the mirror marvell_cloud"), (mirror.parent, "holds the mirror marvell_cloud")):
        result = vault("--catalog", db, "index", str(path))
        assert result.code == 2, result.err
        assert says in result.err and f"vault index {mirror}" in result.err
        assert len(result.err.strip().splitlines()) == 1
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT name, root FROM mirrors").fetchall() == [("marvell_cloud", str(mirror))]
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == before
    assert conn.execute("SELECT count(*) FROM entries WHERE entry_id = ?", (sub.name,)).fetchone()[0] == 1
    assert vault("--catalog", db, "index", "-q", str(sub / "..")).code == 0  # the known root itself, spelled so


def test_non_utf8_file_names_are_kept_losslessly_and_extractable(tmp_path, vault):
    mirror = tmp_path / "m"
    (mirror / "018_x").mkdir(parents=True)
    raw_name = os.path.join(os.fsencode(mirror / "018_x"), b"r\xe9sultat.csv")
    with open(raw_name, "wb") as fh:
        fh.write(b"a,b\n1,2\n")
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(mirror)).code == 0
    conn = sqlite3.connect(db)
    path, raw = conn.execute("SELECT path, raw_path FROM files WHERE raw_path IS NOT NULL").fetchone()
    assert raw == b"018_x/r\xe9sultat.csv" and path == "018_x/r\\xe9sultat.csv"
    listed = vault("--catalog", db, "ls", "018", "--json")
    assert any(h["path"] == "r\\xe9sultat.csv" for h in json.loads(listed.out)["results"])
    out = tmp_path / "out"
    assert vault("--catalog", db, "extract", "018", "r\\xe9sultat.csv", "-o", str(out)).code == 0
    with open(os.path.join(os.fsencode(out), b"r\xe9sultat.csv"), "rb") as fh:  # under its original bytes
        assert fh.read() == b"a,b\n1,2\n"


def test_an_older_catalog_is_migrated_and_a_newer_one_refused(demo_catalog, vault):
    conn = sqlite3.connect(demo_catalog)
    conn.executescript("DROP TABLE seek_points; ALTER TABLE archives DROP COLUMN format; "
                       "DROP TABLE seekable_frames; DROP TABLE seekable; DROP TABLE run_requests; DROP TABLE runs; "
                       "DROP TABLE restores; DROP TABLE generation_events; DROP TABLE member_history; "
                       "DROP TABLE file_history; DROP TABLE generations; ALTER TABLE files DROP COLUMN generation; "
                       "ALTER TABLE members DROP COLUMN pieces; ALTER TABLE files DROP COLUMN pieces; "
                       "ALTER TABLE members DROP COLUMN raw_link_target; ALTER TABLE members DROP COLUMN sparse_map; "
                       "UPDATE meta SET value = '1' "
                       "WHERE key = 'schema_version';")  # fmt: skip
    conn.close()
    assert vault("--catalog", str(demo_catalog), "search", "granite").code == 0  # a reader migrates it first
    conn = sqlite3.connect(demo_catalog)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert conn.execute("SELECT count(*) FROM seekable").fetchone()[0] == 0
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    refused = vault("--catalog", str(demo_catalog), "search", "granite")
    assert refused.code == 6 and "upgrade cloudvault" in refused.err
