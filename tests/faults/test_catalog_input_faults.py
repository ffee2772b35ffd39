"""A catalog or mirror root that is not what it should be: a loop of symlinks, a schema version that is not a
number, a text file or a program named as the catalog. One line, its exit code, advice that works when followed,
and nothing left behind."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys

import pytest


def _one_line(r, code: int) -> None:
    assert r.code == code, (r.code, r.err)
    assert r.err.startswith("vault: error: ") and r.err.count("\n") == 1 and "Traceback" not in r.err, r.err


def test_a_mirror_root_that_is_a_loop_of_symlinks_is_one_line_and_no_catalog(tmp_path, vault, tally):
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    tally("hostile_input")
    r = vault("--catalog", str(tmp_path / "c.db"), "index", str(tmp_path / "a"))
    _one_line(r, 3)
    assert "loop" in r.err and str(tmp_path / "a") in r.err
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "home"]


@pytest.mark.parametrize("version", ["banana", "3.5", "", "-1", "1e3", " 4"])
def test_a_schema_version_that_is_not_a_version_is_a_damaged_catalog_in_one_line(demo_catalog, vault, tally, version):
    conn = sqlite3.connect(demo_catalog)
    with conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    conn.close()
    for argv in (["search", "granite"], ["show", "014"], ["index", "-q"], ["verify", "018"]):
        tally("corruption")
        r = vault("--catalog", str(demo_catalog), *argv)
        tally("traceback", int("Traceback" in r.err))
        _one_line(r, 5)
        assert "schema version" in r.err and "is damaged" in r.err, r.err


def _not_catalogs(tmp_path) -> dict:
    text = tmp_path / "notes.txt"
    text.write_text("the experiment notes\n" * 50)
    program = tmp_path / "python-copy"
    shutil.copy(sys.executable, program)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    return {"text": text, "program": program, "empty": empty, "other sqlite": other}


def test_a_catalog_that_is_a_text_file_or_a_program_is_not_a_vault_catalog_and_index_leaves_nothing(
    tmp_path, vault, demo_mirror, tally
):
    for kind, path in _not_catalogs(tmp_path).items():
        before = path.read_bytes()
        for argv in (["search", "granite"], ["show", "014"], ["index", "-q"], ["index", "-q", str(demo_mirror)],
                     ["optimize"], ["verify"]):  # fmt: skip
            listing = sorted(os.listdir(tmp_path))
            tally("bad_argument")
            r = vault("--catalog", str(path), *argv)
            tally("traceback", int("Traceback" in r.err))
            _one_line(r, 2)
            assert f"--catalog {path} is not a vault catalog" in r.err and "rebuild" not in r.err, (kind, r.err)
            assert sorted(os.listdir(tmp_path)) == listing, (kind, argv)
            assert path.read_bytes() == before


def test_the_error_names_vault_catalog_when_the_variable_named_the_catalog(tmp_path, vault, monkeypatch, tally):
    monkeypatch.setenv("VAULT_CATALOG", str(tmp_path))
    tally("bad_argument")
    r = vault("search", "granite")
    _one_line(r, 2)
    assert f"$VAULT_CATALOG {tmp_path} is a folder" in r.err and "--catalog" not in r.err, r.err
    r = vault("index", "-q")
    _one_line(r, 2)
    assert f"$VAULT_CATALOG {tmp_path} is a folder" in r.err and not os.path.exists(f"{tmp_path}.lock"), r.err
    monkeypatch.setenv("VAULT_CATALOG", str(_not_catalogs(tmp_path)["text"]))
    r = vault("show", "014")
    _one_line(r, 2)
    assert "$VAULT_CATALOG" in r.err and "is not a vault catalog" in r.err and "--catalog" not in r.err, r.err


def test_a_damaged_catalog_says_to_move_it_aside_before_rebuilding(demo_catalog, vault, tmp_path):
    cut = tmp_path / "cut.db"
    cut.write_bytes(demo_catalog.read_bytes()[:8192])
    r = vault("--catalog", str(cut), "search", "granite")
    _one_line(r, 5)
    assert "is damaged" in r.err and "move it aside" in r.err, r.err
