"""Zip archives (.zip, .whl, .jar, .conda) in the mirror: members listed as `unzip -Z1` lists them, hashed as
`unzip -p` gives them, and found by search, ls, extract and verify."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess

from conftest import require
from zips import info_zip, unzip_hash, unzip_names, zip_tree


def _rows(db):
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    return conn.execute(
        "SELECT coalesce(m.raw_path, CAST(m.path AS BLOB)) AS raw, m.* FROM members m ORDER BY m.id"
    ).fetchall()


def _indexed_zip(tmp_path, vault):
    require("zip")
    require("unzip")
    src = zip_tree(tmp_path / "src")
    (tmp_path / "m/018_x/data").mkdir(parents=True)
    archive = info_zip(src, tmp_path / "m/018_x/data/bundle.zip")
    db = tmp_path / "c.db"
    r = vault("--catalog", str(db), "index", "-q", str(tmp_path / "m"))
    assert r.code == 0, r.err
    return db, archive


def test_info_zip_members_are_listed_and_hashed_as_unzip_gives_them(tmp_path, vault):
    db, archive = _indexed_zip(tmp_path, vault)
    rows = {row["raw"]: row for row in _rows(db)}
    names = unzip_names(archive)
    assert sorted(rows) == sorted(names)
    for name in names:
        row = rows[name]
        if row["type"] == "file":
            assert row["blake3"] == unzip_hash(archive, name), name
    assert rows[b"link_to_log"]["type"] == "symlink"
    assert rows[b"link_to_log"]["link_target"] == "logs/run.log"
    assert rows[b"logs/"]["type"] == "dir" and rows[b"logs/"]["path"] == "logs"
    assert rows[b"logs/run.log"]["mode"] == 0o640
    assert rows[b"dumps/big.bin"]["size"] == 6 << 20 and rows[b"dumps/big.bin"]["pieces"]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT status, member_count FROM archives").fetchone() == ("ok", len(names))


def test_zip_members_are_found_listed_extracted_and_verified(tmp_path, vault):
    db, archive = _indexed_zip(tmp_path, vault)
    hit = vault("--catalog", str(db), "search", "유니코드", "--json")
    assert hit.code == 0 and "bundle.zip" in hit.out
    listed = vault("--catalog", str(db), "ls", "018", "--json")
    assert listed.code == 0 and "dumps/big.bin" in listed.out
    out = tmp_path / "out"
    r = vault("--catalog", str(db), "extract", "018", "*", "-o", str(out), "--keep-path", "--json")
    assert r.code == 0, r.err
    ref = tmp_path / "ref"
    subprocess.run(["unzip", "-q", str(archive), "-d", str(ref)], check=True)
    for path in ref.rglob("*"):
        mine = out / path.relative_to(ref)
        if path.is_symlink():
            assert os.readlink(mine) == os.readlink(path)
        elif path.is_file():
            assert mine.read_bytes() == path.read_bytes(), path
    one = vault("--catalog", str(db), "extract", "018", "logs/run.log", "-o", "-")
    assert one.code == 0 and one.out == "step 1\nstep 2\n"
    checked = vault("--catalog", str(db), "verify", "018", "--json")
    assert checked.code == 0, checked.out + checked.err
    assert json.loads(checked.out)
