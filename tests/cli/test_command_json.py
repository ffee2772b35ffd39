"""The --json of `vault index`, `vault optimize`, `vault mirrors` and `vault grep`: each document is the typed
result's to_json(), documented field by field in docs/commands/ (a real run on a small real mirror is the
snapshot)."""

from __future__ import annotations

import json
import shutil

from tests.cli.json_shapes import check


def test_index_json_is_the_documented_shape(demo_mirror, tmp_path, vault):
    mirror = tmp_path / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    db = str(tmp_path / "c.db")
    first = vault("--catalog", db, "index", "--mirror", "marvell_cloud", "--json", str(mirror))
    assert first.code == 0, first.err
    doc = json.loads(first.out)
    assert doc["catalog"] == db and doc["files_read"] > 0 and doc["flags"]
    check(doc, "index.md", "index")
    (tmp_path / "empty").mkdir()
    again = vault("--catalog", db, "index", "--json", str(mirror), str(tmp_path / "empty"))
    assert again.code == 0, again.err
    doc = json.loads(again.out)
    assert doc["empty"] == ["empty"] and doc["files_read"] == 0
    check(doc, "index.md", "index")
    shutil.rmtree(tmp_path / "empty")
    pruned = vault("--catalog", db, "index", "--prune", "--json")
    assert pruned.code == 0, pruned.err
    doc = json.loads(pruned.out)
    assert doc["dropped"] == ["empty"]
    check(doc, "index.md", "index")


def test_index_dry_run_json_is_the_documented_shape(tmp_path, vault):
    r = vault("--catalog", str(tmp_path / "c.db"), "index", "--dry-run", "--workers", "3", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["cores"] == 3
    check(doc, "index.md", "--dry-run")


def test_optimize_json_is_the_documented_shapes(demo_catalog, tmp_path, vault):
    db = str(demo_catalog)
    written = vault("--catalog", db, "optimize", "018", "--to", str(tmp_path / "cache"), "--json")
    assert written.code == 0, written.err
    doc = json.loads(written.out)
    assert doc["written"]
    check(doc, "optimize.md", "optimize")
    again = vault("--catalog", db, "optimize", "--max-gb", "0", "--to", str(tmp_path / "cache"), "--json")
    assert again.code == 0, again.err
    check(json.loads(again.out), "optimize.md", "optimize")
    status = vault("--catalog", db, "optimize", "--status", "--to", str(tmp_path / "cache"), "--json")
    assert status.code == 0, status.err
    doc = json.loads(status.out)
    assert doc["copies"]
    check(doc, "optimize.md", "--status")


def test_mirrors_json_is_the_documented_shapes(demo_catalog, tmp_path, vault):
    db = str(demo_catalog)
    other = tmp_path / "other.db"
    (tmp_path / "scratch" / "001_x").mkdir(parents=True)
    (tmp_path / "scratch" / "001_x" / "a.txt").write_text("a\n")
    assert vault("--catalog", str(other), "index", "-q", str(tmp_path / "scratch")).code == 0
    listed = vault("--catalog", db, "mirrors", "--json")
    assert listed.code == 0, listed.err
    doc = json.loads(listed.out)
    assert {m["in_active_catalog"] for m in doc} == {True, False}
    check(doc, "mirrors.md", "mirrors")
    removed = vault("--catalog", str(other), "mirrors", "rm", "scratch", "--yes", "--json")
    assert removed.code == 0, removed.err
    doc = json.loads(removed.out)
    assert doc["lost"]["files"] == 1
    check(doc, "mirrors.md", "mirrors rm")


def test_grep_json_is_the_documented_shapes(demo_catalog, vault):
    db = str(demo_catalog)
    lines = vault("--catalog", db, "grep", "--json", "-C", "1", "HF_TOKEN", "019")
    assert lines.code == 0, lines.err
    doc = json.loads(lines.out)
    assert {m["type"] for m in doc["matches"]} == {"match", "context"}
    check(doc, "grep.md", "grep")
    counts = vault("--catalog", db, "grep", "--json", "-c", "HF_TOKEN", "019")
    assert counts.code == 0, counts.err
    check(json.loads(counts.out), "grep.md", "grep")
    none = vault("--catalog", db, "grep", "--json", "no-line-holds-this-xyzzy", "019")
    assert none.code == 1 and json.loads(none.out) == {"matches": []}
