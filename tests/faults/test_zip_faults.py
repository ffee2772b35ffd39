"""Hostile and damaged zips through `vault index` and `vault extract`: flagged, the readable part kept, nothing
handed out that the zip's own records do not agree on, nothing written outside the destination."""

from __future__ import annotations

import sqlite3
import zipfile
from pathlib import Path

from zips import hand_zip, python_zip


def _mirror(tmp_path: Path, vault):
    data = tmp_path / "m/019_x"
    data.mkdir(parents=True)
    python_zip(data / "slip.zip", {"../escape.txt": b"out", "/tmp/x_zip_evil": b"abs", "ok.txt": b"fine\n"},
               zipfile.ZIP_DEFLATED)  # fmt: skip
    hand_zip(data / "mismatch.zip", [{"name": b"report.txt", "data": b"shown", "local_name": b"evil.sh"}])
    hand_zip(data / "crc.zip", [{"name": b"rotten.txt", "data": b"rotten", "crc": 1234},
                                {"name": b"good.txt", "data": b"good"}])  # fmt: skip
    hand_zip(data / "overlap.zip", [{"name": b"one", "data": b"shared"}, {"name": b"two", "data": b"x", "at": 0}])
    db = tmp_path / "c.db"
    r = vault("--catalog", str(db), "index", "-q", str(tmp_path / "m"))
    assert r.code == 5, r.err  # damage and unsafe names found: said, and the rest indexed
    return db


def test_zip_slip_names_are_refused_and_nothing_lands_outside(tmp_path, vault):
    db = _mirror(tmp_path, vault)
    dest = tmp_path / "d" / "e"
    dest.mkdir(parents=True)
    for name in ("../escape.txt", "/tmp/x_zip_evil"):
        r = vault("--catalog", str(db), "extract", "019", name, "-o", str(dest), "--keep-path")
        assert r.code == 5 and "refusing" in r.err and r.err.count("\n") == 1, (name, r.err)
    assert list(dest.iterdir()) == [] and not (tmp_path / "d/escape.txt").exists()
    assert not Path("/tmp/x_zip_evil").exists()
    ok = vault("--catalog", str(db), "extract", "019", "ok.txt", "-o", "-")
    assert ok.code == 0 and ok.out == "fine\n"


def test_members_the_zip_disagrees_on_are_never_handed_out(tmp_path, vault):
    db = _mirror(tmp_path, vault)
    for name in ("report.txt", "rotten.txt", "two"):
        r = vault("--catalog", str(db), "extract", "019", name, "-o", str(tmp_path / "o"))
        assert r.code == 5 and "refusing" in r.err and r.err.count("\n") == 1, (name, r.code, r.err)
        assert not (tmp_path / "o" / name).exists()
    good = vault("--catalog", str(db), "extract", "019", "good.txt", "-o", "-")
    assert good.code == 0 and good.out == "good"
    kinds = {k for (k,) in sqlite3.connect(db).execute("SELECT kind FROM flags")}
    assert {"unsafe_member", "zip_header_mismatch", "bad_crc", "zip_overlap"} <= kinds
