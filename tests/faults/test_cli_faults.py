"""The demo never destroys what it did not make; a broken catalog is one line; errors are JSON with --json."""

from __future__ import annotations

import json
import shutil
import sqlite3

from cloudvault.catalog import db as catalog_db


def test_demo_never_replaces_a_folder_it_did_not_build(tmp_path, vault, tally):
    mine = tmp_path / "d/Marvell_cloud"
    mine.mkdir(parents=True)
    (mine / "thesis.tex").write_text("months of work")
    tally("hostile_input")
    r = vault("demo", "--dir", str(tmp_path / "d"))
    assert r.code == 2 and "was not built by `vault demo`" in r.err
    assert (mine / "thesis.tex").read_text() == "months of work"


def test_demo_never_writes_into_a_catalog_it_did_not_create(tmp_path, vault, demo_catalog, tally):
    real = tmp_path / "real.db"
    shutil.copy(demo_catalog, real)
    before = sqlite3.connect(real).execute("SELECT count(*), group_concat(root) FROM mirrors").fetchone()
    files = sqlite3.connect(real).execute("SELECT count(*) FROM files").fetchone()[0]
    tally("hostile_input")
    r = vault("--catalog", str(real), "demo", "--dir", str(tmp_path / "x"))
    assert r.code == 2 and "did not create" in r.err
    conn = sqlite3.connect(real)
    tally("rows_lost", max(0, files - conn.execute("SELECT count(*) FROM files").fetchone()[0]))
    assert conn.execute("SELECT count(*), group_concat(root) FROM mirrors").fetchone() == before
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == files
    assert not (tmp_path / "x").exists()


def test_demo_json_is_one_document_and_a_rerun_reuses_its_own_folder(tmp_path, vault):
    first = vault("demo", "--dir", str(tmp_path / "d"), "--json")
    doc = json.loads(first.out)
    assert first.code == 0 and [j["argv"][0] for j in doc["journeys"]][:3] == ["index", "search", "show"]
    assert all(j["exit_code"] == 0 for j in doc["journeys"]), [j for j in doc["journeys"] if j["exit_code"]]
    assert vault("demo", "--dir", str(tmp_path / "d")).code == 0  # its own folder and catalog: rebuilt


def test_a_catalog_that_is_garbage_empty_truncated_or_a_folder_is_one_line(tmp_path, vault, demo_catalog, tally):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(demo_catalog.read_bytes()[:8192])
    for path, code in ((garbage, 2), (empty, 2), (truncated, 5), (tmp_path, 2)):  # not a catalog: 2; damaged: 5
        for argv in (["search", "granite"], ["show", "014"], ["ls", "018"], ["verify"], ["extract", "018", "x"]):
            tally("corruption")
            r = vault("--catalog", str(path), *argv)
            tally("traceback", int("Traceback" in r.err))
            assert r.code == code, (path.name, argv, r.err)
            assert r.err.startswith("vault: error: ") and r.err.count("\n") == 1 and "Traceback" not in r.err


def test_a_catalog_in_a_folder_nobody_may_write_is_read_immutable(tmp_path, vault, demo_catalog, monkeypatch):
    writable = catalog_db.os.access
    monkeypatch.setattr(
        catalog_db.os, "access", lambda p, mode: False if mode == catalog_db.os.W_OK else writable(p, mode)
    )
    for argv in (["search", "granite"], ["show", "014"], ["ls", "018"]):
        r = vault("--catalog", str(demo_catalog), *argv)
        assert r.code == 0, (argv, r.err)


def test_errors_are_json_objects_with_json(demo_catalog, vault):
    r = vault("--catalog", str(demo_catalog), "show", "nosuch", "--json")
    assert r.code == 3 and json.loads(r.out) == {"error": r.err.removeprefix("vault: error: ").strip(), "exit_code": 3}


def test_show_accepts_a_completed_slash_and_suggests_a_padded_id(demo_catalog, vault):
    assert vault("--catalog", str(demo_catalog), "show", "018_aicluster_breakdown_debugger/").code == 0
    r = vault("--catalog", str(demo_catalog), "show", "14")
    assert r.code == 3 and "014_ss20_temp0_chunk1024" in r.err
