"""Zip archives (.zip, .whl, .jar, .conda) in the mirror: members listed as `unzip -Z1` lists them, hashed as
`unzip -p` gives them, and found by search, ls, extract and verify."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import zipfile
from pathlib import Path

import blake3
import pytest
from archives import assert_same_tree
from conftest import require
from zips import (
    conda_package,
    info_zip,
    partly_encrypted_zip,
    python_zip,
    unzip_hash,
    unzip_names,
    with_methods,
    zip_tree,
)


def _rows(db):
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    return conn.execute(
        "SELECT coalesce(m.raw_path, CAST(m.path AS BLOB)) AS raw, m.* FROM members m ORDER BY m.id"
    ).fetchall()


def _indexed_zip(tmp_path, vault):
    require("zip")
    require("unzip")
    src = zip_tree(tmp_path / "src")
    (tmp_path / "m/018_x/data").mkdir(parents=True)
    archive = info_zip(src, tmp_path / "m/018_x/data/bundle.zip")
    db = tmp_path / "c.db"
    r = vault("--catalog", str(db), "index", "-q", str(tmp_path / "m"))
    assert r.code == 0, r.err
    return db, archive


def test_info_zip_members_are_listed_and_hashed_as_unzip_gives_them(tmp_path, vault):
    db, archive = _indexed_zip(tmp_path, vault)
    rows = {row["raw"]: row for row in _rows(db)}
    names = unzip_names(archive)
    assert sorted(rows) == sorted(names)
    for name in names:
        row = rows[name]
        if row["type"] == "file":
            assert row["blake3"] == unzip_hash(archive, name), name
    assert rows[b"link_to_log"]["type"] == "symlink"
    assert rows[b"link_to_log"]["link_target"] == "logs/run.log"
    assert rows[b"logs/"]["type"] == "dir" and rows[b"logs/"]["path"] == "logs"
    assert rows[b"logs/run.log"]["mode"] == 0o640
    assert rows[b"dumps/big.bin"]["size"] == 6 << 20 and rows[b"dumps/big.bin"]["pieces"]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT status, member_count FROM archives").fetchone() == ("ok", len(names))


def test_zip_members_are_found_listed_extracted_and_verified(tmp_path, vault):
    db, archive = _indexed_zip(tmp_path, vault)
    hit = vault("--catalog", str(db), "search", "유니코드", "--json")
    assert hit.code == 0 and "bundle.zip" in hit.out
    listed = vault("--catalog", str(db), "ls", "018", "--json")
    assert listed.code == 0 and "dumps/big.bin" in listed.out
    out = tmp_path / "out"
    r = vault("--catalog", str(db), "extract", "018", "*", "-o", str(out), "--keep-path", "--json")
    assert r.code == 0, r.err
    ref = tmp_path / "ref"
    subprocess.run(["unzip", "-q", str(archive), "-d", str(ref)], check=True)
    assert_same_tree(ref, out)
    one = vault("--catalog", str(db), "extract", "018", "logs/run.log", "-o", "-")
    assert one.code == 0 and one.out == "step 1\nstep 2\n"
    named = vault("--catalog", str(db), "extract", "018", "logs/run.log", "--archive", "bundle.zip", "-o", "-")
    assert named.code == 0 and named.out == "step 1\nstep 2\n"
    through = vault("--catalog", str(db), "extract", "018", "data/bundle.zip/logs/run.log", "-o", "-")
    assert through.code == 0 and through.out == "step 1\nstep 2\n", through.err  # x.zip/inner, as x.tgz/inner
    checked = vault("--catalog", str(db), "verify", "018", "--json")
    assert checked.code == 0, checked.out + checked.err
    assert json.loads(checked.out)


def _cph_package(out: Path, name: str, pkg: dict[str, bytes], info: dict[str, bytes]) -> Path:
    """A .conda made by conda-package-handling itself (its `api.create` of a prefix holding the files)."""
    if os.environ.get("CI") != "true":  # CI installs the test extra, which has it: there its absence fails
        pytest.importorskip("conda_package_handling")
    from conda_package_handling import api

    prefix = out.parent / "prefix"
    for rel, data in {**pkg, **info}.items():
        (prefix / rel).parent.mkdir(parents=True, exist_ok=True)
        (prefix / rel).write_bytes(data)
    api.create(str(prefix), sorted({**pkg, **info}), out.name, out_folder=str(out.parent))
    shutil.rmtree(prefix)
    return out


@pytest.mark.parametrize("build", [conda_package, _cph_package], ids=["by_hand", "conda_package_handling"])
def test_conda_package_inner_members_are_members_through_the_outer_one(tmp_path, vault, build):
    require("unzip")
    require("zstd")
    require("tar")
    pkg = {"lib/python3.11/site-packages/foo/__init__.py": b"VALUE = 42\n", "bin/foo-tool": b"#!/bin/sh\necho hi\n"}
    info = {"info/index.json": b'{"name": "foo"}', "info/paths.json": b"{}"}
    (tmp_path / "m/015_x/data/miniforge3_pkgs").mkdir(parents=True)
    conda = build(tmp_path / "m/015_x/data/miniforge3_pkgs/foo-1.0-py_0.conda", "foo-1.0-py_0", pkg, info)
    db = tmp_path / "c.db"
    r = vault("--catalog", str(db), "index", "-q", str(tmp_path / "m"))
    assert r.code == 0, r.err
    rows = {row["path"]: row for row in _rows(db)}
    for inner in ("pkg-foo-1.0-py_0.tar.zst", "info-foo-1.0-py_0.tar.zst"):
        listed = subprocess.run(f"unzip -p '{conda}' {inner} | zstd -dc | tar -t", shell=True, capture_output=True,
                                check=True).stdout.decode().split()  # fmt: skip
        assert {p for p in rows if p.startswith(inner + "/")} == {f"{inner}/{name}" for name in listed}
    nested = "pkg-foo-1.0-py_0.tar.zst/lib/python3.11/site-packages/foo/__init__.py"
    truth = subprocess.run(f"unzip -p '{conda}' pkg-foo-1.0-py_0.tar.zst | zstd -dc | tar -xO "
                           "lib/python3.11/site-packages/foo/__init__.py", shell=True, capture_output=True,
                           check=True).stdout  # fmt: skip
    assert truth == b"VALUE = 42\n"
    hit = vault("--catalog", str(db), "search", "foo/__init__.py", "--json")
    assert hit.code == 0 and nested in hit.out
    out = vault("--catalog", str(db), "extract", "015", nested, "-o", "-")
    assert out.code == 0 and out.out.encode() == truth
    folder = vault("--catalog", str(db), "extract", "015", "info-foo-1.0-py_0.tar.zst/info", "-o", str(tmp_path / "o"),
                   "--keep-path")  # fmt: skip
    assert folder.code == 0, folder.err
    assert (tmp_path / "o/info-foo-1.0-py_0.tar.zst/info/index.json").read_bytes() == info["info/index.json"]
    assert vault("--catalog", str(db), "verify", "015").code == 0
    grep = vault("--catalog", str(db), "grep", "VALUE", "015")
    assert grep.code == 0 and f"{nested}:1:VALUE = 42" in grep.out


PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
[project]
name = "tinyproj"
version = "0.1"
"""


def _wheels(tmp_path) -> list:
    """A wheel pip builds here from a tiny project, and the wheels ensurepip ships (real ones, hundreds of members)."""
    import ensurepip
    import sys

    project = tmp_path / "tinyproj"
    (project / "tinyproj").mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "tinyproj/__init__.py").write_text("X = 1\n")
    built = tmp_path / "built"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(built), str(project)],
                   check=True, capture_output=True)  # fmt: skip
    bundled = Path(ensurepip.__file__).parent / "_bundled"
    return [*built.glob("*.whl"), *bundled.glob("*.whl")]


def test_wheels_are_listed_as_unzip_lists_them_and_searchable(tmp_path, vault):
    require("unzip")
    wheels = _wheels(tmp_path)
    assert any(w.name.startswith("tinyproj-") for w in wheels) and len(wheels) >= 2
    cache = tmp_path / "m/016_x/pip_cache"
    cache.mkdir(parents=True)
    for wheel in wheels:
        shutil.copy(wheel, cache / wheel.name)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    conn = sqlite3.connect(db)
    for wheel in wheels:
        rows = conn.execute("SELECT coalesce(m.raw_path, CAST(m.path AS BLOB)), m.type, m.blake3 FROM members m "
                            "JOIN archives a ON a.id = m.archive_id JOIN files f ON f.id = a.file_id "
                            "WHERE f.path LIKE ?", (f"%{wheel.name}",)).fetchall()  # fmt: skip
        assert sorted(r[0] for r in rows) == sorted(unzip_names(cache / wheel.name))
        with zipfile.ZipFile(wheel) as zf:
            for name, _type, digest in rows:
                assert digest == blake3.blake3(zf.read(name.decode())).hexdigest(), name
    record = vault("--catalog", str(db), "search", "tinyproj-0.1.dist-info/RECORD", "--json")
    assert record.code == 0 and "tinyproj-0.1-py3-none-any.whl" in record.out
    assert vault("--catalog", str(db), "verify", "016").code == 0


def test_optimize_leaves_a_zip_alone_it_is_random_access_already(tmp_path, vault):
    big = os.urandom(12 << 20)
    (tmp_path / "m/018_x").mkdir(parents=True)
    with zipfile.ZipFile(tmp_path / "m/018_x/a.zip", "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("big.bin", big)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", "--optimize", str(tmp_path / "m")).code == 0
    r = vault("--catalog", str(db), "optimize", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["written"] == []
    out = vault("--catalog", str(db), "extract", "018", "big.bin", "-o", str(tmp_path / "o"))
    assert out.code == 0 and (tmp_path / "o/big.bin").read_bytes() == big


def test_jar_and_upper_case_zip_names_are_read_as_zips(tmp_path, vault):
    (tmp_path / "m/018_x").mkdir(parents=True)
    for name in ("tool.jar", "OLD.ZIP"):
        with zipfile.ZipFile(tmp_path / "m/018_x" / name, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("META-INF/MANIFEST.MF", f"Manifest-Version: 1.0\nName: {name}\n")
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    hits = vault("--catalog", str(db), "search", "MANIFEST.MF", "--json")
    assert hits.code == 0 and "tool.jar" in hits.out and "OLD.ZIP" in hits.out


def test_an_encrypted_zip_is_counted_and_named_in_the_index_summary(tmp_path, vault):
    """Issue 36: what vault cannot open is counted and named in the summary, never silently skipped; beside a .rar
    (named by its first bytes) an encrypted zip is one more such archive."""
    require("zip")
    (tmp_path / "src").mkdir()
    (tmp_path / "src/secret.txt").write_text("hidden")
    (tmp_path / "m/018_x").mkdir(parents=True)
    subprocess.run(["zip", "-q", "-P", "pw", str(tmp_path / "m/018_x/e.zip"), "secret.txt"], cwd=tmp_path / "src",
                   check=True)  # fmt: skip
    (tmp_path / "m/018_x/old.rar").write_bytes(b"Rar!\x1a\x07\x00" + bytes(64))
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", str(tmp_path / "m"))
    assert "2 archives in formats vault does not open: .rar x1, encrypted .zip x1" in r.out, r.out + r.err
    touched = tmp_path / "m/018_x/e.zip"
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))
    again = json.loads(vault("--catalog", db, "index", "--json", str(tmp_path / "m")).out)
    assert again["not_opened"] == {"encrypted .zip": 1}


def test_an_encrypted_zip_is_a_file_vault_does_not_open_verified_whole(tmp_path, vault):
    """Its members are listed (names are not encrypted) but not opened; the file itself is hashed, extracted and
    verified whole, and verify does not call it damaged."""
    require("zip")
    from archives import flip_byte

    (tmp_path / "src").mkdir()
    (tmp_path / "src/secret.txt").write_text("hidden")
    (tmp_path / "m/018_x").mkdir(parents=True)
    archive = tmp_path / "m/018_x/e.zip"
    subprocess.run(["zip", "-q", "-P", "pw", str(archive), "secret.txt"], cwd=tmp_path / "src", check=True)
    db = tmp_path / "c.db"
    r = vault("--catalog", str(db), "index", str(tmp_path / "m"))
    assert r.code == 0 and "unsupported format" in r.out, r.out + r.err
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT status FROM archives").fetchone() == ("unsupported",)
    whole = vault("--catalog", str(db), "extract", "018", "e.zip", "-o", str(tmp_path / "o"))
    assert whole.code == 0 and (tmp_path / "o/e.zip").read_bytes() == archive.read_bytes()
    assert vault("--catalog", str(db), "extract", "018", "secret.txt", "-o", "-").code == 5
    checked = vault("--catalog", str(db), "verify", "018")
    assert checked.code == 0, checked.out + checked.err
    flip_byte(archive, 40)
    assert vault("--catalog", str(db), "verify", "018").code == 5


def test_a_partly_encrypted_zip_is_read_but_for_its_encrypted_members_which_are_named(tmp_path, vault):
    """Issue 36: the summary counts and names the zips with encrypted members; their plain members are searched,
    extracted and verified as `unzip -p` gives them; an encrypted one is refused in one line naming it."""
    require("zip")
    require("unzip")
    (tmp_path / "m/018_x").mkdir(parents=True)
    archive = partly_encrypted_zip(tmp_path / "src", tmp_path / "m/018_x/a.zip")
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", str(tmp_path / "m"))
    assert r.code == 0, r.out + r.err
    assert "  1 zip with 2 encrypted members vault cannot read: 018_x/a.zip\n" in r.out, r.out
    assert "formats vault does not open" not in r.out
    truth = subprocess.run(["unzip", "-p", str(archive), "plain.txt"], capture_output=True, check=True).stdout
    plain = vault("--catalog", db, "extract", "018", "plain.txt", "-o", "-")
    assert plain.code == 0 and plain.out.encode() == truth
    for name in ("secret.txt", "key.txt"):
        refused = vault("--catalog", db, "extract", "018", name, "-o", str(tmp_path / "o"))
        assert refused.code == 5 and refused.err.count("\n") == 1, refused.err
        assert name in refused.err and "encrypted" in refused.err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
    checked = vault("--catalog", db, "verify", "018")
    assert checked.code == 5, checked.out + checked.err
    lines = [line for line in checked.out.splitlines() if line.startswith("FLAGGED")]
    assert sorted(lines) == [f"FLAGGED 018_x/a.zip :: {n}: encrypted member: encrypted with traditional PKWARE "
                             "(ZipCrypto): vault cannot read it without its password; its bytes are not handed out"
                             for n in ("key.txt", "secret.txt")], checked.out  # fmt: skip
    assert "re-index" not in checked.out
    again = tmp_path / "m/018_x/b.zip"
    partly_encrypted_zip(tmp_path / "src2", again, encrypted_first=False)
    doc = json.loads(vault("--catalog", db, "index", "--json", str(tmp_path / "m")).out)
    assert doc["encrypted_members"] == {"018_x/b.zip": 2} and doc["damaged"] is False


def test_zip_members_in_methods_vault_does_not_read_are_counted_by_method(tmp_path, vault):
    """Deflate64 and PPMd members (their method fields so patched) are flagged, counted by method in the summary,
    and refused; the zip's other members are read and `vault index` calls nothing damaged."""
    (tmp_path / "m/018_x").mkdir(parents=True)
    one = python_zip(tmp_path / "m/018_x/one.zip", {"a.bin": b"a" * 99, "b.bin": b"b" * 99, "ok.txt": b"fine\n"},
                     zipfile.ZIP_STORED)  # fmt: skip
    with_methods(one, {"a.bin": 9, "b.bin": 98})
    two = python_zip(tmp_path / "m/018_x/two.zip", {"c.bin": b"c" * 99, "d.txt": b"d\n"}, zipfile.ZIP_STORED)
    with_methods(two, {"c.bin": 9})
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", str(tmp_path / "m"))
    assert r.code == 0, r.out + r.err
    assert "  3 zip members in methods vault does not read: Deflate64 x2, PPMd x1\n" in r.out, r.out
    ok = vault("--catalog", db, "extract", "018", "ok.txt", "-o", "-")
    assert ok.code == 0 and ok.out == "fine\n"
    refused = vault("--catalog", db, "extract", "018", "a.bin", "-o", "-")
    assert refused.code == 5 and refused.err.count("\n") == 1 and "a.bin" in refused.err and "Deflate64" in refused.err
