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
