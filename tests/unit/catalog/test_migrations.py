"""Catalog migrations: a catalog of every older schema version is brought to the current one, step by step, each
step one transaction with its version record, under the writer lock, never losing a row nothing can rebuild."""

from __future__ import annotations

import fcntl
import os
import sqlite3

import pytest

from cloudvault.catalog import db, migrations, records
from cloudvault.catalog.db import SCHEMA_VERSION, open_catalog
from cloudvault.errors import CatalogBusy, CatalogTooNew, CatalogTooOld, VaultError

# What each version lacked of the next: applied from the newest down, they turn a current catalog into an older
# one, as vault of that version left it (the tables and columns it had, the rows it held).
BACK_FROM = {
    11: "".join(f"DROP TABLE {t}_fts; CREATE VIRTUAL TABLE {t}_fts USING fts5(path, content='{t}', content_rowid='id', "
                f"tokenize='trigram'); INSERT INTO {t}_fts({t}_fts) VALUES ('rebuild');" for t in ("members", "files")),
    10: "",  # nothing in the schema: a FIRST_PARTS piece BLOB (cloudvault/pieces.py) may be written since
    9: "CREATE TRIGGER members_ai AFTER INSERT ON members BEGIN "
    "INSERT INTO members_fts(rowid, path) VALUES (new.id, new.path); END;",
    8: "DROP TABLE nested;",
    7: "DROP TABLE seek_points; ALTER TABLE archives DROP COLUMN format;",
    6: "DROP TABLE generation_events; DROP TABLE member_history; DROP TABLE file_history; DROP TABLE generations; "
    "ALTER TABLE files DROP COLUMN generation;",
    5: "ALTER TABLE files DROP COLUMN pieces; ALTER TABLE members DROP COLUMN pieces;",
    4: "ALTER TABLE members DROP COLUMN raw_link_target; ALTER TABLE members DROP COLUMN sparse_map;",
    3: "DROP TABLE run_requests; DROP TABLE runs; DROP TABLE restores;",
    2: "DROP TABLE seekable_frames; DROP TABLE seekable;",
}


def as_version(path, version: int) -> None:
    conn = sqlite3.connect(path)
    for newer in range(SCHEMA_VERSION, version, -1):
        conn.executescript(BACK_FROM[newer])
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.commit()
    conn.close()


def shape(path) -> dict[str, object]:
    """Every table's columns (name, type, not null, default, key) and every index and trigger, by name."""
    conn = sqlite3.connect(path)
    try:
        objects = conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
        found = {name: kind for kind, name in objects}
        for kind, name in objects:
            if kind == "table":
                found[name] = [tuple(c[1:6]) for c in conn.execute(f"PRAGMA table_xinfo('{name}')")]
        return found
    finally:
        conn.close()


def version_of(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
    finally:
        conn.close()


def count(path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def with_records(path) -> None:
    """A restore and a finished run with its per-request rows: what no `vault index` can rebuild."""
    conn = open_catalog(path)
    records.record_restore(conn, kind="env", mirror_id=1, entry_id="015", name="env", source="015/env.tar.zst",
                           source_hash="ab" * 32, target="/opt/env", status="ok", detail={"files": 3},
                           started_at=records.now())  # fmt: skip
    records.start_run(conn, run_id="r1", recipe="standin", recipe_hash="cd" * 32, mirror_id=1, entry_id="014",
                      executor="local", folder="/runs/r1")  # fmt: skip
    records.finish_run(conn, "r1", status="done", verdict="reproduced", requests=[("q1", "same", None, {})])
    conn.close()


def dump(path, table: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
    finally:
        conn.close()


def test_the_last_step_reaches_the_version_vault_reads_and_writes():
    """Every version from 1 has its step, and the last is catalog/db.py's SCHEMA_VERSION: a new step without it (or
    it without a step) would leave catalogs a version short, or claim one no step made."""
    assert sorted(migrations.STEPS) == list(range(1, SCHEMA_VERSION + 1))


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_a_catalog_of_every_older_version_is_migrated_to_the_schema_a_new_one_has(demo_catalog, tmp_path, version):
    fresh = tmp_path / "fresh.db"
    open_catalog(fresh, create=True).close()
    members, files = count(demo_catalog, "members"), count(demo_catalog, "files")
    as_version(demo_catalog, version)
    changed = any(BACK_FROM[newer] for newer in range(version + 1, SCHEMA_VERSION + 1))  # 10 changed no table
    assert (shape(demo_catalog) != shape(fresh)) == changed
    open_catalog(demo_catalog).close()
    assert version_of(demo_catalog) == SCHEMA_VERSION
    assert shape(demo_catalog) == shape(fresh)
    assert (count(demo_catalog, "members"), count(demo_catalog, "files")) == (members, files)


def test_restores_and_runs_survive_a_migration(demo_catalog):
    """Version 3 brought them: from it on, every step keeps them as they were."""
    with_records(demo_catalog)
    kept = {table: dump(demo_catalog, table) for table in ("restores", "runs", "run_requests")}
    as_version(demo_catalog, 3)
    open_catalog(demo_catalog).close()
    assert {table: dump(demo_catalog, table) for table in kept} == kept
    assert all(kept.values())


def test_a_step_that_fails_leaves_the_catalog_whole_at_the_last_version_it_reached(demo_catalog, monkeypatch):
    """From version 2, step 3 commits; step 4 fails on its last statement: nothing of step 4 stays."""
    as_version(demo_catalog, 2)
    mtimes = dump(demo_catalog, "files")
    monkeypatch.setitem(migrations.STEPS, 4, migrations.STEPS[4] + "SELECT no_such_column FROM members;")
    with pytest.raises(VaultError):
        open_catalog(demo_catalog)
    assert version_of(demo_catalog) == 3
    assert "raw_link_target" not in {c[0] for c in shape(demo_catalog)["members"]}
    assert dump(demo_catalog, "files") == mtimes  # step 4's UPDATE was rolled back with it
    monkeypatch.undo()
    open_catalog(demo_catalog).close()
    assert version_of(demo_catalog) == SCHEMA_VERSION


def test_a_migration_waits_for_no_one_it_refuses_while_another_vault_holds_the_writer_lock(demo_catalog, vault):
    as_version(demo_catalog, 3)
    fd = os.open(f"{demo_catalog}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running `vault index` holds it
        os.pwrite(fd, b"4242", 0)
        with pytest.raises(CatalogBusy):
            open_catalog(demo_catalog)
        r = vault("--catalog", str(demo_catalog), "search", "granite")  # a reader asks for the lock, too
        assert r.code == 6 and "pid 4242" in r.err and f"schema {SCHEMA_VERSION}" in r.err and "retry" in r.err, r.err
        assert version_of(demo_catalog) == 3
    finally:
        os.close(fd)
    assert vault("--catalog", str(demo_catalog), "search", "granite").code == 0
    assert version_of(demo_catalog) == SCHEMA_VERSION


def test_a_reader_that_cannot_write_an_old_catalog_says_in_one_line_what_to_run(demo_catalog, monkeypatch):
    as_version(demo_catalog, 3)
    monkeypatch.setattr(db.os, "access", lambda path, mode: False)  # a shared copy this user cannot write
    with pytest.raises(CatalogTooOld) as refused:
        open_catalog(demo_catalog, readonly=True)
    assert "\n" not in refused.value.message and "vault index" in refused.value.message
    assert refused.value.exit_code == 6 and version_of(demo_catalog) == 3


def test_a_catalog_indexed_under_this_process_s_writer_lock_migrates_without_taking_it_twice(demo_catalog):
    as_version(demo_catalog, 3)
    with db.writer_lock(demo_catalog):
        open_catalog(demo_catalog).close()
    assert version_of(demo_catalog) == SCHEMA_VERSION


def test_a_catalog_from_before_generations_becomes_generation_0_in_one_step_and_is_compared_with(demo_catalog, vault):
    """Every row it held belongs to generation 0, a row that says so; the next index is generation 1 and reads
    nothing unchanged (the recorded hashes stay the reference, not checked again by the migration)."""
    as_version(demo_catalog, 5)
    files = count(demo_catalog, "files")
    open_catalog(demo_catalog).close()
    conn = sqlite3.connect(demo_catalog)
    assert conn.execute("SELECT DISTINCT generation FROM files").fetchall() == [(0,)]
    (row,) = conn.execute("SELECT id, seen, finished_at IS NOT NULL, mirrors FROM generations").fetchall()
    assert row == (0, files, 1, '["marvell_cloud"]')
    conn.close()
    r = vault("--catalog", str(demo_catalog), "log", "--json")
    assert r.code == 0 and '"generation": 0' in r.out


def test_a_version_4_catalog_gets_piece_columns_and_its_big_objects_are_read_again_by_the_next_index(
        demo_catalog, demo_mirror, vault):  # fmt: skip
    """Step 5: nothing recorded before it is taken as having pieces; the next `vault index` reads every archive and
    every plain file over a piece again (their ctime forgotten, size and mtime kept) and records them."""
    as_version(demo_catalog, 4)
    before = dict(sqlite3.connect(demo_catalog).execute("SELECT path, mtime_ns FROM files").fetchall())
    open_catalog(demo_catalog).close()
    conn = sqlite3.connect(demo_catalog)
    assert conn.execute("SELECT count(*) FROM members WHERE pieces IS NOT NULL").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM files WHERE pieces IS NOT NULL").fetchone()[0] == 0
    assert dict(conn.execute("SELECT path, mtime_ns FROM files").fetchall()) == before
    stale = conn.execute("SELECT count(*) FROM files WHERE ctime_ns = -1").fetchone()[0]
    big = conn.execute("SELECT count(*) FROM members WHERE size > 1048576 AND type = 'file'").fetchone()[0]
    conn.close()
    assert stale > 0 and big > 0
    r = vault("--catalog", str(demo_catalog), "index", "--json", "--mirror", "marvell_cloud", str(demo_mirror))
    assert r.code in (0, 5), r.err
    conn = sqlite3.connect(demo_catalog)
    assert conn.execute("SELECT count(*) FROM files WHERE ctime_ns = -1").fetchone()[0] == 0
    recorded = conn.execute("SELECT count(*) FROM members WHERE pieces IS NOT NULL").fetchone()[0]
    assert recorded == big
    conn.close()


def test_a_version_6_catalog_s_archives_are_all_tar_zst_and_still_extract(demo_catalog, vault, tmp_path):
    """Step 7: the archives' format column, every archive recorded before being a .tar.zst; no seek points."""
    as_version(demo_catalog, 6)
    archives = count(demo_catalog, "archives")
    open_catalog(demo_catalog).close()
    conn = sqlite3.connect(demo_catalog)
    assert conn.execute("SELECT format, count(*) FROM archives GROUP BY format").fetchall() == [("tar.zst", archives)]
    assert conn.execute("SELECT count(*) FROM seek_points").fetchone()[0] == 0
    entry, path = conn.execute("SELECT f.entry_id, mb.path FROM members mb JOIN archives a ON a.id = mb.archive_id "
                               "JOIN files f ON f.id = a.file_id WHERE mb.type = 'file' AND mb.size > 0").fetchone()
    conn.close()
    r = vault("--catalog", str(demo_catalog), "extract", entry, path, "-o", str(tmp_path / "out"))
    assert r.code == 0, r.err


def test_a_version_7_catalog_reads_again_only_the_archives_holding_a_member_named_as_a_tar(demo_catalog):
    """Step 8: an archive holding `x.tgz` (or .tar.gz, .tar, .txz ...) may hold an archive to open one level
    deeper, so the next `vault index` reads it again (its ctime forgotten); no other archive or file is."""
    as_version(demo_catalog, 7)
    conn = sqlite3.connect(demo_catalog)
    archive_id, file_id = conn.execute("SELECT id, file_id FROM archives ORDER BY id LIMIT 1").fetchone()
    conn.execute("INSERT INTO members(archive_id, path, type, size, mode, mtime, uid, gid, uname, gname, header_offset,"
                 " data_offset) VALUES (?, 'data/raw/inner.TGZ', 'file', 10, 420, 0, 0, 0, '', '', 0, 512)",
                 (archive_id,))  # fmt: skip
    named = {fid for (fid,) in conn.execute(
        "SELECT DISTINCT a.file_id FROM archives a JOIN members m ON m.archive_id = a.id WHERE m.type = 'file' AND "
        "(m.path LIKE '%.tar' OR m.path LIKE '%.t_z' OR m.path LIKE '%.tbz2' OR m.path LIKE '%.gz' OR m.path LIKE "
        "'%.bz2' OR m.path LIKE '%.xz' OR m.path LIKE '%.zst' OR m.path LIKE '%.zstd')")}  # fmt: skip
    conn.commit()
    conn.close()
    open_catalog(demo_catalog).close()
    conn = sqlite3.connect(demo_catalog)
    stale = {fid for (fid,) in conn.execute("SELECT id FROM files WHERE ctime_ns = -1")}
    assert conn.execute("SELECT count(*) FROM nested").fetchone()[0] == 0
    conn.close()
    assert file_id in stale and stale == named | {file_id}


def test_a_version_8_catalog_s_members_keep_their_search_rows_without_a_trigger_per_row(demo_catalog, demo_mirror,
                                                                                        vault):  # fmt: skip
    """Step 9: a member's search row is written by `vault index` in one pass after its archive's rows, not by a
    trigger per row; the rows a version-8 catalog holds stay found, and an index after the step adds new ones."""
    as_version(demo_catalog, 8)
    conn = sqlite3.connect(demo_catalog)
    assert "members_ai" in {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    path = conn.execute("SELECT path FROM members WHERE type = 'file' ORDER BY id LIMIT 1").fetchone()[0]
    conn.close()
    open_catalog(demo_catalog).close()
    conn = sqlite3.connect(demo_catalog)
    triggers = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                                 "AND tbl_name = 'members'")}  # fmt: skip
    assert triggers == {"members_ad"}  # a removed member still leaves the search index by its trigger
    conn.execute("INSERT INTO members_fts(members_fts, rank) VALUES ('integrity-check', 1)")
    conn.execute("DELETE FROM files WHERE id = (SELECT file_id FROM archives ORDER BY id LIMIT 1)")
    conn.commit()
    conn.execute("INSERT INTO members_fts(members_fts, rank) VALUES ('integrity-check', 1)")
    conn.close()
    r = vault("--catalog", str(demo_catalog), "index", "-q", "--mirror", "marvell_cloud", str(demo_mirror))
    assert r.code in (0, 5), r.err
    conn = sqlite3.connect(demo_catalog)
    conn.execute("INSERT INTO members_fts(members_fts, rank) VALUES ('integrity-check', 1)")  # rows and index alike
    conn.close()
    r = vault("--catalog", str(demo_catalog), "search", path.rpartition("/")[2], "--kind", "member", "--json")
    assert r.code == 0 and path in r.out, r.out + r.err


@pytest.mark.parametrize("readonly", [False, True])
def test_a_vault_of_schema_9_reading_first_parts_blobs_as_no_pieces_refuses_a_catalog_that_may_hold_them(
        demo_catalog, monkeypatch, readonly):  # fmt: skip
    """f8a1143 (schema 9) takes a FIRST_PARTS BLOB (pieces.py) for no piece hashes at all: its mount would answer EIO
    for every member of more than a MiB, a false alarm of damage. A catalog this vault writes says schema 10, so that
    vault refuses it in one line ("upgrade cloudvault") instead of crying corruption."""
    monkeypatch.setattr(db, "SCHEMA_VERSION", 9)
    with pytest.raises(CatalogTooNew) as raised:
        open_catalog(demo_catalog, readonly=readonly).close()
    assert raised.value.exit_code == CatalogTooNew.exit_code and "upgrade cloudvault" in str(raised.value)


PATH_SEARCH = ("members_fts", "files_fts")


def column_sizes_kept(path) -> set[str]:
    """The path search tables that keep each row's size in tokens (their _docsize table): only a ranking uses it."""
    conn = sqlite3.connect(path)
    try:
        names = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()
    return {table for table in PATH_SEARCH if f"{table}_docsize" in names}


def test_a_version_10_catalog_s_path_search_is_rebuilt_without_column_sizes_and_finds_what_it_found(
        demo_catalog, demo_mirror, vault):  # fmt: skip
    """Step 11: members_fts and files_fts keep no column sizes (columnsize=0: ~35% of filling members_fts for 200k
    small members, and no path search ranks its hits). They are the only tables a step rebuilds: their rows are
    made again from the members and files they index. A search finds the same hits after the step, a removed archive
    leaves the index by its trigger, and the next `vault index` keeps rows and index in step."""
    fresh = demo_catalog.parent / "fresh.db"
    open_catalog(fresh, create=True).close()
    assert column_sizes_kept(fresh) == set()
    as_version(demo_catalog, 10)
    assert column_sizes_kept(demo_catalog) == set(PATH_SEARCH)
    terms = ("json", ".py", "log", "granite")
    before = {(kind, term): vault("--catalog", str(demo_catalog), "search", term, "--kind", kind, "--limit", "0",
                                  "--json").out for kind in ("member", "file") for term in terms}  # fmt: skip
    assert all('"path"' in before[kind, term] for kind in ("member", "file") for term in terms[:3]), before
    open_catalog(demo_catalog).close()
    assert version_of(demo_catalog) == SCHEMA_VERSION and column_sizes_kept(demo_catalog) == set()
    after = {(kind, term): vault("--catalog", str(demo_catalog), "search", term, "--kind", kind, "--limit", "0",
                                 "--json").out for kind in ("member", "file") for term in terms}  # fmt: skip
    assert after == before
    conn = sqlite3.connect(demo_catalog)
    for table in PATH_SEARCH:
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
    conn.execute("DELETE FROM files WHERE id = (SELECT file_id FROM archives ORDER BY id LIMIT 1)")
    conn.commit()
    for table in PATH_SEARCH:
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
    conn.close()
    r = vault("--catalog", str(demo_catalog), "index", "-q", "--mirror", "marvell_cloud", str(demo_mirror))
    assert r.code in (0, 5), r.err
    conn = sqlite3.connect(demo_catalog)
    for table in PATH_SEARCH:
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
    conn.close()
