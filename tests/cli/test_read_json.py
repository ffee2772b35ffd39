"""The read commands' --json (verify, extract, search, ls, show, info, log, diff): each document is the typed
result's to_json(), documented field by field in docs/commands/ (a real run on a small real mirror is the snapshot)."""

from __future__ import annotations

import json
import shutil
import sqlite3

from tests.cli.json_shapes import check


def test_verify_json_is_the_documented_shape(demo_mirror, tmp_path, vault):
    mirror = tmp_path / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(mirror)).code == 0
    clean = vault("--catalog", db, "verify", "--json")
    assert clean.code == 0, clean.err
    check(json.loads(clean.out), "verify.md", "verify")
    csv = mirror / "014_ss20_temp0_chunk1024/data/20260925_070231/per_request.csv"
    csv.write_text(csv.read_text().replace("8,192", "8,193").replace("8192", "8193"))
    damaged = vault("--catalog", db, "verify", "--json")
    assert damaged.code == 5
    doc = json.loads(damaged.out)
    assert doc["mismatches"] and doc["ok"] is False
    check(doc, "verify.md", "verify")
    sample = vault("--catalog", db, "verify", "--sample", "50%", "--seed", "1", "--json")
    check(json.loads(sample.out), "verify.md", "verify")


def test_extract_json_is_the_documented_shape(demo_catalog, tmp_path, vault):
    db = str(demo_catalog)
    one = vault("--catalog", db, "extract", "018", "accept_meta.json", "-o", str(tmp_path / "one"), "--json")
    assert one.code == 0, one.err
    check(json.loads(one.out), "extract.md", "extract")
    out = tmp_path / "all"
    archive = vault("--catalog", db, "extract", "019", "score_block_n82.tar.zst/*", "-o", str(out), "--keep-path",
                    "--json")  # fmt: skip
    assert archive.code == 0, archive.err
    doc = json.loads(archive.out)
    assert any(w["archive"] for w in doc["written"])
    check(doc, "extract.md", "extract")


def test_search_and_flagged_json_are_the_documented_shapes(demo_catalog, vault):
    db = str(demo_catalog)
    found = vault("--catalog", db, "search", "granite", "--json")
    assert found.code == 0, found.err
    doc = json.loads(found.out)
    assert {r["kind"] for r in doc["results"]} >= {"entry", "file"}
    check(doc, "search.md", "search")
    none = vault("--catalog", db, "search", "nothing-is-named-this", "--kind", "file", "--json")
    assert none.code == 1
    check(json.loads(none.out), "search.md", "search")
    flagged = vault("--catalog", db, "search", "--flagged", "--json")
    assert flagged.code == 0, flagged.err
    doc = json.loads(flagged.out)
    assert doc["flags"]
    check(doc, "search.md", "--flagged")


def test_ls_json_is_the_documented_shape(demo_catalog, vault):
    db = str(demo_catalog)
    listed = vault("--catalog", db, "ls", "019", "--json")
    assert listed.code == 0, listed.err
    doc = json.loads(listed.out)
    assert {r["kind"] for r in doc["results"]} == {"file", "member"}
    check(doc, "ls.md", "ls")
    none = vault("--catalog", db, "ls", "019", "no-such-*", "--json")
    assert none.code == 1
    check(json.loads(none.out), "ls.md", "ls")


def test_show_json_is_the_documented_shape(demo_catalog, tmp_path, vault):
    db = str(demo_catalog)
    shown = vault("--catalog", db, "show", "014", "--json")
    assert shown.code == 0, shown.err
    check(json.loads(shown.out), "show.md", "show")
    restored = vault("--catalog", db, "restore", "env", "nebius", "vaultdemo", "--prefix", str(tmp_path / "env"),
                     "--json")  # fmt: skip
    assert restored.code == 0, restored.err
    entry = json.loads(restored.out)["restored"][0]["name"]
    (entry,) = sqlite3.connect(db).execute("SELECT entry_id FROM restores WHERE name = ?", (entry,)).fetchone()
    with_restore = vault("--catalog", db, "show", entry, "--json")
    assert with_restore.code == 0, with_restore.err
    doc = json.loads(with_restore.out)
    assert doc["restores"]
    check(doc, "show.md", "show")


def test_info_json_is_the_documented_shape(demo_catalog, tmp_path, vault):
    held = vault("--catalog", str(demo_catalog), "info", "--json")
    assert held.code == 0, held.err
    doc = json.loads(held.out)
    assert doc["mirrors"] and doc["catalog"]["exists"] is True
    check(doc, "info.md", "info")
    none = vault("--catalog", str(tmp_path / "none.db"), "info", "--json")
    assert none.code == 3
    doc = json.loads(none.out)
    assert doc == {"catalog": {"path": str(tmp_path / "none.db"), "named_by": "--catalog", "exists": False},
                   "mirrors": []}  # fmt: skip
    check(doc, "info.md", "info")


def test_log_and_diff_json_are_the_documented_shapes(tmp_path, vault):
    entry = tmp_path / "m/018_x"
    entry.mkdir(parents=True)
    (entry / "a.txt").write_text("one\n")
    (entry / "b.txt").write_text("two\n")
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(tmp_path / "m")).code == 0
    first = vault("--catalog", db, "diff", "--json")
    assert first.code == 0, first.err
    assert json.loads(first.out)["from"] is None
    check(json.loads(first.out), "diff.md", "diff")
    (entry / "a.txt").write_text("one, longer\n")
    (entry / "b.txt").unlink()
    (entry / "c.txt").write_text("three\n")
    assert vault("--catalog", db, "index", "-q", str(tmp_path / "m")).code == 0
    log = vault("--catalog", db, "log", "--json")
    assert log.code == 0, log.err
    doc = json.loads(log.out)
    assert len(doc["generations"]) == 2
    check(doc, "log.md", "log")
    second = vault("--catalog", db, "diff", "1", "2", "--json")
    assert second.code == 0, second.err
    doc = json.loads(second.out)
    assert doc["from"] == 1 and doc["added"] and doc["removed"] and doc["modified"]
    check(doc, "diff.md", "diff")


def test_the_read_operations_hand_the_cli_frozen_typed_results():
    import dataclasses

    from cloudvault import diff, extract, listing, search, verify
    from cloudvault.catalog import details, summary

    for cls in (diff.GenerationDiff, diff.IndexLog, summary.CatalogInfo):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen and "__slots__" in vars(cls), cls
    for cls in (extract.ExtractReport, verify.VerifyReport, search.Searched, search.Flags, listing.Listing,
                details.EntryDetails):
        assert issubclass(cls, tuple) and hasattr(cls, "_fields") and hasattr(cls, "to_json"), cls


def test_show_says_what_formats_the_entrys_archives_are(tmp_path, vault):
    """Issue 36: an entry holding a .tar.zst, a .tar.gz and a .zip is not "3 .tar.zst": show names each format the
    catalog recorded (by content: a .tgz that is zstd counts as .tar.zst), in text and in --json."""
    import subprocess

    from conftest import require

    require("zip")
    src, data = tmp_path / "src", tmp_path / "m/018_x/data"
    src.mkdir()
    data.mkdir(parents=True)
    for name in ("a.txt", "b.txt"):
        (src / name).write_text(name)
    subprocess.run(["tar", "--zstd", "-cf", str(data / "one.tar.zst"), "a.txt", "b.txt"], cwd=src, check=True)
    subprocess.run(["tar", "--zstd", "-cf", str(data / "zstd_really.tgz"), "a.txt"], cwd=src, check=True)
    subprocess.run(["tar", "-czf", str(data / "two.tar.gz"), "a.txt", "b.txt"], cwd=src, check=True)
    subprocess.run(["zip", "-q", str(data / "three.zip"), "a.txt"], cwd=src, check=True)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(tmp_path / "m")).code == 0
    shown = vault("--catalog", db, "show", "018")
    assert shown.code == 0, shown.err
    assert "  archives   4 archives (.tar.zst x2, .tar.gz x1, .zip x1) holding 6 members\n" in shown.out, shown.out
    doc = json.loads(vault("--catalog", db, "show", "018", "--json").out)
    assert doc["archive_formats"] == {"tar.zst": 2, "tar.gz": 1, "zip": 1} and doc["archives"] == 4
    check(doc, "show.md", "show")
