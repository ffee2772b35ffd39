"""What `vault index` sets for its large transactions: the full-text indexes of paths merge their segments less
eagerly (FTS5 automerge 16, SQLite's default 4): filling members_fts for 200k members took about half the time,
and a search over five such batches was no slower (bench/index.py measures the index)."""

from __future__ import annotations

import sqlite3

from cloudvault.catalog.db import for_bulk_writes, open_catalog


def automerge(conn: sqlite3.Connection, table: str) -> int | None:
    row = conn.execute(f"SELECT v FROM {table}_config WHERE k = 'automerge'").fetchone()
    return row[0] if row else None


def test_bulk_writes_let_the_path_indexes_merge_less_eagerly_and_search_still_finds_every_path(tmp_path):
    conn = open_catalog(tmp_path / "cat.db", create=True)
    for_bulk_writes(conn)
    assert automerge(conn, "members_fts") == 16 and automerge(conn, "files_fts") == 16
    conn.execute("INSERT INTO mirrors(name, root) VALUES ('lab', '/m')")
    mirror = conn.execute("SELECT id FROM mirrors").fetchone()[0]
    conn.execute("INSERT INTO entries(mirror_id, entry_id, what, node_gpu, measured, size_text, key_files, caution, "
                 "settings, present) VALUES (?, '018', '', '', '', '', '', '', '{}', 1)", (mirror,))  # fmt: skip
    for batch in range(20):  # many small commits: many segments, merged as they grow
        with conn:
            conn.executemany(
                "INSERT INTO files(mirror_id, entry_id, path, kind, size, mtime_ns, ctime_ns, inode, mode) "
                "VALUES (?, '018', ?, 'file', 1, 1, 1, 1, 420)",
                [(mirror, f"018/run{batch:02d}/rank{i:04d}.log") for i in range(500)],
            )
    found = {p for (p,) in conn.execute("SELECT path FROM files_fts WHERE files_fts MATCH '\"rank0042\"'")}
    assert found == {f"018/run{batch:02d}/rank0042.log" for batch in range(20)}


def page_size(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()


def test_a_new_catalog_has_16_kib_pages_and_one_of_4_kib_pages_is_kept_and_written_as_it_is(tmp_path, vault):
    """A catalog `vault index` creates has pages of 16 KiB (SQLite's default is 4 KiB): its large commits write a
    quarter of the WAL frames, ~7% off indexing 200k small members, the file no larger (docs/performance.md). A
    catalog made with 4 KiB pages (every one before) keeps them: changing would rewrite the whole file (VACUUM), and
    its index, search and extract work as before."""
    mirror = tmp_path / "m" / "018_runs"
    mirror.mkdir(parents=True)
    (mirror / "granite_notes.txt").write_text("notes\n")
    new = tmp_path / "new.db"
    assert vault("--catalog", str(new), "index", "-q", str(tmp_path / "m")).code == 0
    assert page_size(new) == 16384
    old = tmp_path / "old.db"
    conn = sqlite3.connect(new)
    conn.execute("VACUUM INTO ?", (str(old),))  # the same catalog, then rewritten with 4 KiB pages
    conn.close()
    conn = sqlite3.connect(old)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("VACUUM")
    conn.close()
    assert page_size(old) == 4096
    (mirror / "granite_more.txt").write_text("more\n")
    assert vault("--catalog", str(old), "index", "-q", str(tmp_path / "m")).code == 0
    assert page_size(old) == 4096
    found = vault("--catalog", str(old), "search", "granite", "--kind", "file", "--json")
    assert found.code == 0 and "granite_more.txt" in found.out and "granite_notes.txt" in found.out, found.out
