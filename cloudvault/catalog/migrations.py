"""Numbered steps that bring an older catalog to the current schema, each one transaction with its version record.

Step N takes a catalog of version N-1 to version N: its own SQL, then schema.sql (whose CREATE ... IF NOT EXISTS
adds the tables and indexes that version brought), then the new version in `meta`, all between one BEGIN
IMMEDIATE and its COMMIT, so a crash or a failed statement leaves the catalog at N-1, whole. A step changes
tables in place (ADD COLUMN, UPDATE) and never drops or rebuilds one: restores and runs are rows nothing can
rebuild; the one exception is a search table over other rows (FTS5 external content), whose index is made again
from the rows it indexes, in the same transaction. Steps run under the writer lock (catalog.db.open_catalog takes
it), never by a reader alone.
"""

from __future__ import annotations

import os
import sqlite3

from cloudvault import __version__

# names of members that may be tars (formats.might_be_archive's, less the zip, rar and 7z ones): LIKE ignores case
NESTED_NAMES = (".tar", ".tgz", ".taz", ".tbz2", ".tbz", ".tb2", ".txz", ".tzst", ".tzs", ".gz", ".bz2", ".xz", ".zst",
                ".zstd")  # fmt: skip
SCHEMA_FILE = os.path.join(os.path.dirname(__file__), "schema.sql")

# version -> the SQL that takes a catalog from version-1 to it, before schema.sql adds what is new; the last is
# catalog/db.py's SCHEMA_VERSION.
STEPS: dict[int, str] = {
    1: "",  # the first schema (a meta table without a version: schema.sql creates the rest)
    2: "",  # the seekable tables (schema.sql creates them)
    3: "",  # restores, runs, run_requests (schema.sql creates them)
    # Members keep link targets' raw bytes and sparse members' maps. Archives indexed before it were read with
    # sparse members as plain files and hardlinks resolved to a target's last version: their records are not
    # trusted (the recorded mtime no longer matches, so extract refuses them as stale) until `vault index`
    # re-reads them. Every archive, not only those with sparse or hardlink members: a version-3 catalog
    # recorded a PAX sparse member as a plain file under its own name, so which ones they were is not known.
    4: """
ALTER TABLE members ADD COLUMN raw_link_target BLOB;
ALTER TABLE members ADD COLUMN sparse_map TEXT;
UPDATE files SET mtime_ns = -1 WHERE id IN (SELECT file_id FROM archives);
""",
    # Piece hashes (catalog/schema.sql says what they are). Objects recorded before have none: a read of one of
    # more than a piece is withheld until its whole BLAKE3 is checked (or, through the mount, refused). Their
    # ctime is forgotten, so the next `vault index` reads them again and records their pieces (their size and
    # mtime are kept: extract still finds them as indexed, and a re-read that finds other bytes is news).
    5: """
ALTER TABLE files ADD COLUMN pieces BLOB;
ALTER TABLE members ADD COLUMN pieces BLOB;
UPDATE files SET ctime_ns = -1
    WHERE (kind = 'file' AND size > 1048576) OR id IN (SELECT file_id FROM archives);
""",
    # Index runs are generations. Every row a catalog held before belongs to generation 0 (recorded before
    # generations were kept; AFTER_SCHEMA writes its row), so the next `vault index` is generation 1 and compares
    # what it reads with those recorded hashes: they stay the reference, never taken as checked again.
    6: """
ALTER TABLE files ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
""",
    # Archives in other formats than .tar.zst (archive/formats.py): every archive recorded before is a .tar.zst;
    # the seek points of gzip and bzip2 archives come in a table of their own (schema.sql).
    7: """
ALTER TABLE archives ADD COLUMN format TEXT NOT NULL DEFAULT 'tar.zst';
""",
    # Archives inside archives (schema.sql's nested table). An archive recorded before that holds a member named
    # as a tar (archive/formats.py's names) has its ctime forgotten, so the next `vault index` reads it again and
    # records the members of that member (the same bytes: a `same` version, its generation kept); no other is read.
    8: f"""
UPDATE files SET ctime_ns = -1 WHERE id IN (SELECT a.file_id FROM archives a JOIN members m ON m.archive_id = a.id
    WHERE m.type = 'file' AND ({" OR ".join(f"m.path LIKE '%{suffix}'" for suffix in NESTED_NAMES)}));
""",
    # A member's search row is written by `vault index` in one pass after its archive's rows (catalog/files.py
    # build_member_search), not by a trigger per row; the rows already in members_fts stay as they are.
    9: """
DROP TRIGGER IF EXISTS members_ai;
""",
    # Piece BLOBs may be FIRST_PARTS ones (cloudvault/pieces.py: the first piece's 64 KiB parts before the piece
    # values). Nothing changes in the tables: the version tells a vault of schema 9, which would take such a BLOB for
    # no piece hashes (and its mount answer EIO for a sound member), that the catalog is newer than it.
    10: "",
    # The path search tables keep no column sizes (schema.sql's columnsize=0): made again, empty, by schema.sql,
    # then filled from the rows they index (AFTER_SCHEMA).
    11: "DROP TABLE members_fts;\nDROP TABLE files_fts;\n",
}

# version -> SQL run after schema.sql made that version's tables, in the same transaction (rows for new tables).
AFTER_SCHEMA: dict[int, str] = {
    6: """
INSERT INTO generations(id, started_at, finished_at, mirrors, seen)
SELECT 0, coalesce((SELECT min(indexed_at) FROM mirrors), ''), (SELECT max(indexed_at) FROM mirrors),
       (SELECT json_group_array(name) FROM mirrors), (SELECT count(*) FROM files)
WHERE EXISTS (SELECT 1 FROM files);
""",
    11: """
INSERT INTO members_fts(members_fts) VALUES ('rebuild');
INSERT INTO files_fts(files_fts) VALUES ('rebuild');
""",
}


def schema_sql() -> str:
    with open(SCHEMA_FILE, encoding="utf-8") as fh:
        return fh.read()


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def version_record(version: int) -> str:
    """The SQL that records version (and the tool that wrote it) in meta."""
    return "".join(
        f"INSERT INTO meta(key, value) VALUES ({_quoted(key)}, {_quoted(value)}) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value;\n"
        for key, value in (("schema_version", str(version)), ("tool_version", __version__))
    )


def run_in_one_transaction(conn: sqlite3.Connection, sql: str) -> None:
    """sql (several statements) as one transaction: all of it, or, when a statement fails, none of it."""
    try:
        conn.executescript(f"BEGIN IMMEDIATE;\n{sql}\nCOMMIT;")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def create_schema(conn: sqlite3.Connection, version: int) -> None:
    """A new catalog's tables and its version record (the current version), in one transaction."""
    run_in_one_transaction(conn, schema_sql() + version_record(version))


def migrate(conn: sqlite3.Connection, found: int, to: int) -> list[int]:
    """Run the steps from version found to version to, one transaction each; the versions reached."""
    reached = []
    for version in range(found + 1, to + 1):
        sql = STEPS[version] + schema_sql() + AFTER_SCHEMA.get(version, "") + version_record(version)
        run_in_one_transaction(conn, sql)
        reached.append(version)
    return reached
