"""`vault info`: which catalog answers, what named it (--catalog, $VAULT_CATALOG, the default, the demo's), its
mirrors, counts and last index; and `vault search` that finds nothing names the catalog it asked."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3

from cloudvault import config


def _counts(db) -> dict:
    conn = sqlite3.connect(db)
    one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    return {
        "entries": one("SELECT count(*) FROM entries WHERE entry_id != '' AND present = 1"),
        "files": one("SELECT count(*) FROM files"),
        "archives": one("SELECT count(*) FROM archives"),
        "members": one("SELECT count(*) FROM members"),
    }


def test_info_names_the_catalog_what_named_it_its_mirrors_and_counts(demo_catalog, demo_mirror, vault):
    r = vault("--catalog", str(demo_catalog), "info", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["catalog"] == {"path": str(demo_catalog), "named_by": "--catalog", **doc["catalog"]}
    mirrors = {m["name"]: m for m in doc["mirrors"]}
    assert mirrors["marvell_cloud"]["root"] == str(demo_mirror) and mirrors["marvell_cloud"]["indexed_at"]
    assert {k: sum(m[k] for m in doc["mirrors"]) for k in _counts(demo_catalog)} == _counts(demo_catalog)
    assert doc["last_index"] == max(m["indexed_at"] for m in doc["mirrors"])
    text = vault("--catalog", str(demo_catalog), "info")
    assert text.code == 0 and str(demo_catalog) in text.out and "--catalog" in text.out
    assert str(demo_mirror) in text.out and f"{_counts(demo_catalog)['files']} files" in text.out, text.out


def test_info_says_the_demo_catalog_answers_until_there_is_ones_own(demo_catalog, vault, monkeypatch):
    demo = config.demo_catalog_path()
    os.makedirs(os.path.dirname(demo))
    shutil.copy(demo_catalog, demo)
    doc = json.loads(vault("info", "--json").out)
    assert doc["catalog"]["path"] == demo and doc["catalog"]["named_by"] == "demo"
    own = config.catalog_path(writing=True)
    shutil.copy(demo_catalog, own)
    doc = json.loads(vault("info", "--json").out)
    assert doc["catalog"]["path"] == own and doc["catalog"]["named_by"] == "default"
    monkeypatch.setenv("VAULT_CATALOG", str(demo_catalog))
    doc = json.loads(vault("info", "--json").out)
    assert doc["catalog"]["path"] == str(demo_catalog) and doc["catalog"]["named_by"] == "$VAULT_CATALOG"


def test_info_without_a_catalog_says_where_it_would_be_and_exits_3(tmp_path, vault):
    r = vault("--catalog", str(tmp_path / "none.db"), "info")
    assert r.code == 3 and str(tmp_path / "none.db") in r.out and "vault index" in r.out, (r.out, r.err)


def test_search_that_finds_nothing_names_the_catalog_it_asked(demo_catalog, vault, monkeypatch):
    r = vault("--catalog", str(demo_catalog), "search", "zzqqxx")
    assert r.code == 1 and str(demo_catalog) in r.out + r.err and "--catalog" in r.out + r.err, (r.out, r.err)
    monkeypatch.setenv("VAULT_CATALOG", str(demo_catalog))
    r = vault("search", "zzqqxx")
    assert r.code == 1 and str(demo_catalog) in r.out + r.err and "$VAULT_CATALOG" in r.out + r.err, (r.out, r.err)
