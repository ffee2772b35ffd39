"""`vault mirrors` as a user meets it: every mirror the active catalog and the per-user registry know, present or
missing; `vault mirrors rm NAME` says what the catalog loses first and removes it only when told to."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from cloudvault.catalog.mirror_registry import registered


def _plain_mirror(root: Path, n: int = 3) -> Path:
    (root / "001_x").mkdir(parents=True)
    for i in range(n):
        (root / f"001_x/f{i}.txt").write_text(f"file {i}\n")
    return root


def _count(db: Path, sql: str) -> int:
    return sqlite3.connect(db).execute(sql).fetchone()[0]


def test_mirrors_lists_the_catalogs_and_the_registrys_mirrors_present_or_missing(tmp_path, vault):
    one, two, three = (_plain_mirror(tmp_path / name) for name in ("one", "two", "three"))
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    assert vault("--catalog", str(a), "index", "-q", str(one), str(two)).code == 0
    assert vault("--catalog", str(b), "index", "-q", str(three)).code == 0
    shutil.rmtree(two)
    r = vault("--catalog", str(a), "mirrors", "--json")
    assert r.code == 0, r.err
    rows = {row["name"]: row for row in json.loads(r.out)}
    assert rows.keys() == {"one", "two", "three"}
    assert rows["one"]["root"] == str(one) and rows["one"]["present"] is True and rows["one"]["files"] == 3
    assert rows["one"]["entries"] == 1 and rows["one"]["members"] == 0 and rows["one"]["indexed_at"]
    assert rows["one"]["in_active_catalog"] is True and rows["one"]["catalog"] == str(a)
    assert rows["two"]["present"] is False and rows["two"]["files"] == 3
    assert rows["three"]["in_active_catalog"] is False and rows["three"]["catalog"] == str(b)
    assert rows["three"]["files"] is None  # another catalog's counts are not guessed
    r = vault("--catalog", str(a), "mirrors")
    lines = r.out.splitlines()
    assert r.code == 0 and lines[0].split()[:2] == ["NAME", "ENTRIES"]
    assert any(line.split()[0] == "two" and "missing" in line.split() for line in lines)
    assert any(line.split()[0] == "three" and str(b) in line for line in lines)


def test_mirrors_counts_what_the_catalog_holds(demo_catalog, vault):
    r = vault("--catalog", str(demo_catalog), "mirrors", "--json")
    (row,) = json.loads(r.out)
    assert row["name"] == "marvell_cloud" and row["present"] is True
    assert row["files"] == _count(demo_catalog, "SELECT count(*) FROM files") > 50
    assert row["members"] == _count(demo_catalog, "SELECT count(*) FROM members") > 50
    assert row["entries"] == _count(demo_catalog, "SELECT count(*) FROM entries WHERE entry_id != ''") > 10


def test_no_mirrors_known_says_how_to_index_one(vault):
    r = vault("mirrors")
    assert r.code == 1 and "vault index" in r.out


def test_rm_without_yes_and_no_terminal_is_refused_in_one_line_naming_what_it_would_lose(demo_catalog, vault):
    files = _count(demo_catalog, "SELECT count(*) FROM files")
    r = vault("--catalog", str(demo_catalog), "mirrors", "rm", "marvell_cloud")
    assert r.code == 2 and r.err.count("\n") == 1 and "--yes" in r.err and f"{files} files" in r.err, r.err
    assert _count(demo_catalog, "SELECT count(*) FROM files") == files


def test_rm_yes_says_what_is_lost_then_removes_every_row_of_the_mirror(demo_catalog, demo_mirror, vault, tmp_path):
    db = str(demo_catalog)
    assert vault("--catalog", db, "repro", "016_plots", "--out", str(tmp_path / "runs")).code in (0, 10)
    members = _count(demo_catalog, "SELECT count(*) FROM members")
    r = vault("--catalog", db, "mirrors", "rm", "marvell_cloud", "--yes")
    assert r.code == 0, r.err
    said, done = r.out.splitlines()[0], r.out.splitlines()[-1]
    assert f"{members} members" in said and "1 run" in said and "removed" in done
    for table in ("mirrors", "entries", "files", "archives", "members", "frames", "flags", "docs"):
        assert _count(demo_catalog, f"SELECT count(*) FROM {table}") == 0, table
    assert _count(demo_catalog, "SELECT count(*) FROM runs WHERE mirror_id IS NULL") == 1  # history kept
    assert vault("--catalog", db, "search", "granite").code == 1  # the full-text rows went with them
    conn = sqlite3.connect(demo_catalog)
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert vault("--catalog", db, "mirrors", "rm", "marvell_cloud", "--yes").code == 3


def test_rm_forgets_the_registry_record_and_the_guard_lets_go(tmp_path, vault):
    one = _plain_mirror(tmp_path / "one")
    db = str(tmp_path / "a.db")
    assert vault("--catalog", db, "index", "-q", str(one)).code == 0
    assert [row.root for row in registered()] == [str(one)]
    r = vault("--catalog", db, "mirrors", "rm", "one", "--yes", "--json")
    assert r.code == 0 and json.loads(r.out)["lost"]["files"] == 3 and registered() == []
    assert vault("--catalog", db, "mirrors").code == 1


def test_rm_of_a_mirror_whose_catalog_is_gone_forgets_it_from_the_registry(tmp_path, vault):
    one = _plain_mirror(tmp_path / "one")
    gone = tmp_path / "gone.db"
    assert vault("--catalog", str(gone), "index", "-q", str(one)).code == 0
    for path in tmp_path.glob("gone.db*"):
        path.unlink()
    r = vault("mirrors", "rm", "one")
    assert r.code == 2 and r.err.count("\n") == 1 and "--yes" in r.err and registered() != []
    r = vault("mirrors", "rm", "one", "--yes")
    assert r.code == 0 and registered() == [], r.err


def test_rm_of_a_mirror_of_another_catalog_names_that_catalog(tmp_path, vault):
    one, two = _plain_mirror(tmp_path / "one"), _plain_mirror(tmp_path / "two")
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    assert vault("--catalog", a, "index", "-q", str(one)).code == 0
    assert vault("--catalog", b, "index", "-q", str(two)).code == 0
    r = vault("--catalog", a, "mirrors", "rm", "two", "--yes")
    assert r.code == 2 and r.err.count("\n") == 1 and f"vault --catalog {b} mirrors rm two" in r.err, r.err
    assert _count(Path(b), "SELECT count(*) FROM files") == 3 and len(registered()) == 2


def test_rm_of_an_unknown_name_lists_the_known_ones(tmp_path, vault):
    one = _plain_mirror(tmp_path / "one")
    db = str(tmp_path / "a.db")
    assert vault("--catalog", db, "index", "-q", str(one)).code == 0
    r = vault("--catalog", db, "mirrors", "rm", "onw", "--yes")
    assert r.code == 3 and r.err.count("\n") == 1 and "one" in r.err


def _on_a_terminal(argv: list[str], answer: bytes) -> subprocess.CompletedProcess:
    """vault run with its stdin a terminal (a pty), answering the prompt."""
    leader, follower = os.openpty()
    os.write(leader, answer)
    try:
        return subprocess.run([sys.executable, "-m", "cloudvault", *argv], stdin=follower, capture_output=True,
                              text=True, timeout=60)  # fmt: skip
    finally:
        os.close(follower)
        os.close(leader)


def test_rm_on_a_terminal_asks_and_a_no_keeps_everything(tmp_path, vault):
    one = _plain_mirror(tmp_path / "one")
    db = tmp_path / "a.db"
    assert vault("--catalog", str(db), "index", "-q", str(one)).code == 0
    r = _on_a_terminal(["--catalog", str(db), "mirrors", "rm", "one"], b"n\n")
    assert r.returncode == 2 and "3 files" in r.stdout + r.stderr, r.stderr
    assert _count(db, "SELECT count(*) FROM files") == 3
    r = _on_a_terminal(["--catalog", str(db), "mirrors", "rm", "one"], b"y\n")
    assert r.returncode == 0 and _count(db, "SELECT count(*) FROM files") == 0, r.stderr


def test_json_is_honoured_before_or_after_rm(tmp_path, vault):
    db = str(tmp_path / "a.db")
    for i, argv in enumerate((["--json", "rm", "one", "--yes"], ["rm", "one", "--yes", "--json"])):
        one = _plain_mirror(tmp_path / f"{i}/one")
        assert vault("--catalog", db, "index", "-q", str(one)).code == 0
        r = vault("--catalog", db, "mirrors", *argv)
        assert r.code == 0 and json.loads(r.out)["removed"] == "one", (argv, r.out)
