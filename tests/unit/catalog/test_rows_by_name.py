"""Rows are read by column name, never by position: a column a migration adds (anywhere in the table) or a SELECT
whose columns are reordered cannot shift a record's field."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from cloudvault.catalog import records
from cloudvault.catalog.db import open_catalog
from cloudvault.catalog.rows import records_of

PACKAGE = Path(__file__).parents[3] / "cloudvault"
BY_POSITION = re.compile(r"\b[A-Z]\w*\(\*(r|row)\)|SELECT \* FROM \{table\} WHERE")


def test_no_record_is_built_from_a_row_by_position():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        found += [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1)
                  if BY_POSITION.search(line)]  # fmt: skip
    assert found == []


def test_a_column_added_to_runs_and_restores_shifts_no_field(tmp_path):
    db = tmp_path / "c.db"
    conn = open_catalog(db, create=True)
    records.record_restore(conn, kind="env", mirror_id=None, entry_id="015", name="neo", source="015/neo.tar.zst",
                           source_hash="ab", target="/e/neo", status="ok", detail={},
                           started_at=records.now())  # fmt: skip
    records.start_run(conn, run_id="r1", recipe="014", recipe_hash="h", mirror_id=None, entry_id="014",
                      executor="local", folder="/runs/r1")  # fmt: skip
    for table in ("runs", "restores"):  # as a later migration would: appended to the table, last of SELECT *
        conn.execute(f"ALTER TABLE {table} ADD COLUMN later_column TEXT DEFAULT 'x'")
    conn.commit()
    (restore,) = records.restores(conn)
    (run,) = records.runs(conn)
    assert (restore.name, restore.target, restore.status) == ("neo", "/e/neo", "ok")
    assert (run.run_id, run.recipe_hash, run.folder, run.status) == ("r1", "h", "/runs/r1", "running")
    conn.close()


def test_records_of_reads_each_field_by_its_column_name():
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b", defaults=(None,))
    conn = sqlite3.connect(":memory:")
    assert records_of(Pair, conn.execute("SELECT 2 AS b, 1 AS a, 3 AS c")) == [Pair(1, 2)]
    assert records_of(Pair, conn.execute("SELECT 1 AS a")) == [Pair(1, None)]  # a field with a default may be left
