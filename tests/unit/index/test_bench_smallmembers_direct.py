"""bench/smallmembers_direct.py: the prototype of rows written straight into the catalog during the scan, measured
against `vault index` (docs/performance.md). It must store what it claims to, or its timing means nothing."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import bench_module

from cloudvault.cli.main import main


@pytest.mark.parametrize("search_during", [False, True])
def test_the_prototype_stores_every_member_tarfile_wrote_with_its_search_row(tmp_path, tarfile_archive, search_during):
    path, names = tarfile_archive
    (tmp_path / "empty" / "018_x").mkdir(parents=True)
    catalog = tmp_path / "c.db"
    assert main(["--catalog", str(catalog), "index", "-q", str(tmp_path / "empty")]) == 0
    bench = bench_module("smallmembers_direct")
    assert bench.direct_index(path, catalog, search_during=search_during) == 300
    conn = sqlite3.connect(catalog)
    assert sorted(p for (p,) in conn.execute("SELECT path FROM members")) == names
    found = conn.execute("SELECT m.path FROM members_fts f JOIN members m ON m.id = f.rowid "
                         "WHERE members_fts MATCH '\"rank123\"'").fetchall()  # fmt: skip
    assert found == [("logs/123/rank123.log",)]
    sizes = dict(conn.execute("SELECT path, size FROM members"))
    assert sizes["logs/007/rank007.log"] == 35
