"""Hostile and damaged zips through `vault index` and `vault extract`: flagged, the readable part kept, nothing
handed out that the zip's own records do not agree on, nothing written outside the destination."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import zipfile
from pathlib import Path

from conftest import require
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


def test_zip_slip_names_and_links_out_are_refused_and_nothing_lands_outside(tmp_path, vault):
    require("zip")
    db = _mirror(tmp_path, vault)
    dest = tmp_path / "d" / "e"
    dest.mkdir(parents=True)
    for name in ("../escape.txt", "/tmp/x_zip_evil"):
        r = vault("--catalog", str(db), "extract", "019", name, "-o", str(dest), "--keep-path")
        assert r.code == 5 and "refusing" in r.err and r.err.count("\n") == 1, (name, r.err)
    links = tmp_path / "links"
    links.mkdir()
    os.symlink("/etc", links / "etc_link")
    subprocess.run(["zip", "-q", "-y", str(tmp_path / "m/019_x/links.zip"), "etc_link"], cwd=links, check=True)
    vault("--catalog", str(db), "index", "-q", str(tmp_path / "m"))
    r = vault("--catalog", str(db), "extract", "019", "etc_link", "-o", str(dest))
    assert r.code == 5 and r.err.count("\n") == 1
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


def test_a_token_inside_a_zip_member_and_a_nested_one_is_flagged_never_stored(tmp_path, vault):
    from zips import conda_package

    token = "hf_" + "Q" * 34
    data = tmp_path / "m/020_x"
    data.mkdir(parents=True)
    big = b"x" * (2 << 20) + f"\nAWS key AKIA{'Z' * 16}\n".encode()
    python_zip(data / "logs.zip", {"env.log": f"export HF_TOKEN={token}\n".encode(), "big.log": big,
                                   "clean.log": b"nothing here\n"})  # fmt: skip
    conda_package(data / "p-1-0.conda", "p-1-0", {"etc/env.sh": f"HF_TOKEN={token}\n".encode()}, {"info/a": b"{}"})
    db = tmp_path / "c.db"
    vault("--catalog", str(db), "index", "-q", str(tmp_path / "m"))
    rows = sqlite3.connect(db).execute("SELECT member, detail FROM flags WHERE kind = 'secret'").fetchall()
    flagged = {member for member, _ in rows}
    assert {"env.log", "big.log", "pkg-p-1-0.tar.zst/etc/env.sh"} <= flagged and "clean.log" not in flagged
    assert token not in db.read_bytes().decode("latin-1")


def test_a_zip_damaged_since_indexing_keeps_its_members_and_only_the_hit_one_is_refused(tmp_path, vault):
    from archives import flip_byte

    data = tmp_path / "m/021_x"
    data.mkdir(parents=True)
    members = {f"m{i}.bin": bytes([i]) * 50_000 + os.urandom(2000) for i in range(5)}
    archive = python_zip(data / "d.zip", members, zipfile.ZIP_STORED)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    with zipfile.ZipFile(archive) as zf:
        hit = zf.getinfo("m2.bin")
    flip_byte(archive, hit.header_offset + 30 + len("m2.bin") + 1000)  # inside m2.bin's data; mtime kept
    r = vault("--catalog", str(db), "index", str(tmp_path / "m"))
    assert r.code == 5, r.out + r.err
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM members").fetchone()[0] == 5  # none forgotten
    damaged = {m for (m,) in conn.execute("SELECT member FROM flags WHERE kind = 'damaged_member'")}
    assert damaged == {"m2.bin"}
    assert vault("--catalog", str(db), "extract", "021", "m2.bin", "-o", str(tmp_path / "o")).code == 5
    ok = vault("--catalog", str(db), "extract", "021", "m3.bin", "-o", str(tmp_path / "o"))
    assert ok.code == 0 and (tmp_path / "o/m3.bin").read_bytes() == members["m3.bin"]


def test_grep_never_shows_the_bytes_of_a_member_the_zip_disagrees_on(tmp_path, vault):
    db = _mirror(tmp_path, vault)
    r = vault("--catalog", str(db), "grep", "shown", "019")
    assert "report.txt:1:shown" not in r.out and "report.txt" in r.err and r.code == 2  # not searched: said
    good = vault("--catalog", str(db), "grep", "good", "019")
    assert "good.txt:1:good" in good.out


def _set_local_flags(archive: Path, name: str, flags: int) -> None:
    """The general purpose flags of one member's local header (its central record left as it was)."""
    import struct

    with zipfile.ZipFile(archive) as zf:
        at = zf.getinfo(name).header_offset
    data = bytearray(archive.read_bytes())
    struct.pack_into("<H", data, at + 6, flags)
    archive.write_bytes(bytes(data))


def test_a_member_whose_records_disagree_on_encryption_is_refused_and_its_neighbours_read(tmp_path, vault):
    """Which bytes does the mirror hold, plain or encrypted? A central record calling a member plain while its local
    header says encrypted (what unzip asks a password for) is flagged zip_header_mismatch and never handed out."""
    data = tmp_path / "m/022_x"
    data.mkdir(parents=True)
    archive = python_zip(data / "e.zip", {"plain.txt": b"plain\n", "odd.txt": b"looks plain\n"}, zipfile.ZIP_STORED)
    _set_local_flags(archive, "odd.txt", 1)
    db = tmp_path / "c.db"
    r = vault("--catalog", str(db), "index", "-q", str(tmp_path / "m"))
    assert r.code == 5, r.out + r.err
    flags = sqlite3.connect(db).execute("SELECT kind, member, detail FROM flags").fetchall()
    assert [(kind, member) for kind, member, _ in flags] == [("zip_header_mismatch", "odd.txt")]
    assert "encrypted" in flags[0][2]
    refused = vault("--catalog", str(db), "extract", "022", "odd.txt", "-o", "-")
    assert refused.code == 5 and refused.out == "" and refused.err.count("\n") == 1, refused.err
    plain = vault("--catalog", str(db), "extract", "022", "plain.txt", "-o", "-")
    assert plain.code == 0 and plain.out == "plain\n"


def test_an_encrypted_member_and_one_in_an_unread_method_are_refused_by_grep_too(tmp_path, vault):
    from zips import partly_encrypted_zip, with_methods

    require("zip")
    data = tmp_path / "m/023_x"
    data.mkdir(parents=True)
    partly_encrypted_zip(tmp_path / "src", data / "a.zip")
    with_methods(python_zip(data / "d64.zip", {"d.txt": b"hidden words\n"}, zipfile.ZIP_STORED), {"d.txt": 9})
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    r = vault("--catalog", str(db), "grep", "hidden", "023")
    assert "hidden" not in r.out and r.code == 2, r.out  # not searched: said, one line each
    said = sorted(line for line in r.err.splitlines() if "not searched" in line)
    assert len(said) == 3 and all("encrypted member" in line for line in said[:2]) and "Deflate64" in said[2], said
    found = vault("--catalog", str(db), "grep", "everyone", "023")
    assert "a.zip::plain.txt:1:for everyone" in found.out, found.out + found.err
