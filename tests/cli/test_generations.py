"""Index runs as generations: a byte changed in place is suspected corruption, not an update; a new mtime is a new
version; `vault log` and `vault diff` show what each run saw and changed."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from archives import flip_byte, three_frame_mirror
from conftest import require


@pytest.fixture
def exp02(tmp_path, vault):
    """(mirror root, catalog) of the three-frame mirror, indexed once (generation 1)."""
    require("pzstd")
    root = three_frame_mirror(tmp_path / "m", tmp_path / "work")
    db = tmp_path / "cat.db"
    r = vault("--catalog", str(db), "index", "--quiet", str(root))
    assert r.code == 0, r.err
    return root, db


def _hash_in_catalog(db: Path, path: str) -> str:
    return sqlite3.connect(db).execute("SELECT blake3 FROM files WHERE path = ?", (path,)).fetchone()[0]


def test_a_byte_changed_in_place_keeps_the_recorded_hash_and_is_refused_until_accepted(exp02, tmp_path, vault):
    root, db = exp02
    notes = root / "exp02/notes.txt"
    good = tmp_path / "notes.good"
    shutil.copy2(notes, good)
    recorded = _hash_in_catalog(db, "exp02/notes.txt")
    flip_byte(notes, 3)
    r = vault("--catalog", str(db), "verify", "exp02")
    assert r.code == 5 and "MISMATCH exp02/notes.txt" in r.out

    r = vault("--catalog", str(db), "index", str(root))  # the ctime changed: it is read again
    assert r.code == 5, r.out + r.err
    assert "1 changed in place" in r.out and "vault verify" in r.out and "vault index --accept" in r.out
    from cloudvault.cli.ui import human_size

    assert f"1 read ({human_size(notes.stat().st_size)}," in r.out  # its bytes were read, and counted
    assert _hash_in_catalog(db, "exp02/notes.txt") == recorded  # the reference stays
    r = vault("--catalog", str(db), "verify", "exp02")
    assert r.code == 5 and "exp02/notes.txt" in r.out and "all match" not in r.out
    out = tmp_path / "out"
    r = vault("--catalog", str(db), "extract", "exp02", "notes.txt", "-o", str(out))
    assert r.code == 5 and "changed in place" in r.err, r.out + r.err
    assert not (out / "notes.txt").exists()
    r = vault("--catalog", str(db), "extract", "exp02", "notes.txt", "-o", "-")
    assert r.code == 5 and r.out == ""

    # the good copy put back (same mtime): it matches the reference again, and nothing is flagged
    shutil.copy2(good, notes)
    assert vault("--catalog", str(db), "index", "--quiet", str(root)).code == 0
    r = vault("--catalog", str(db), "verify", "exp02")
    assert r.code == 0 and "all match" in r.out

    # corrupted again, then accepted deliberately: the new bytes are the new version
    flip_byte(notes, 3)
    assert vault("--catalog", str(db), "index", "--quiet", str(root)).code == 5
    r = vault("--catalog", str(db), "index", "--accept", str(notes), str(root))
    assert r.code == 0, r.out + r.err
    assert _hash_in_catalog(db, "exp02/notes.txt") != recorded
    r = vault("--catalog", str(db), "extract", "exp02", "notes.txt", "-o", "-")
    assert r.code == 0 and r.out == notes.read_text()


def test_an_archive_changed_in_place_keeps_its_recorded_members(exp02, vault):
    root, db = exp02
    archive = root / "exp02/data.tar.zst"
    before = sqlite3.connect(db).execute("SELECT count(*) FROM members").fetchone()[0]
    recorded = _hash_in_catalog(db, "exp02/data.tar.zst")
    flip_byte(archive, 6_000_000)  # in the second frame
    r = vault("--catalog", str(db), "index", str(root))
    assert r.code == 5 and "1 changed in place" in r.out
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM members").fetchone()[0] == before
    assert _hash_in_catalog(db, "exp02/data.tar.zst") == recorded
    r = vault("--catalog", str(db), "verify", "exp02")
    assert r.code == 5 and "all match" not in r.out and "data.tar.zst" in r.out


def test_a_new_mtime_is_a_new_version_and_the_old_one_is_history(exp02, vault):
    root, db = exp02
    notes = root / "exp02/notes.txt"
    old = _hash_in_catalog(db, "exp02/notes.txt")
    notes.write_text("run 2: loss 0.29 (rerun)\n")
    os.utime(notes, (1_800_000_000, 1_800_000_000))
    (root / "exp02/new.txt").write_text("added\n")
    r = vault("--catalog", str(db), "index", str(root))
    assert r.code == 0, r.out + r.err
    assert "1 modified" in r.out and "0 changed in place" in r.out
    assert _hash_in_catalog(db, "exp02/notes.txt") != old
    conn = sqlite3.connect(db)
    gens = [row[0] for row in conn.execute("SELECT generation FROM files WHERE path LIKE 'exp02/%' ORDER BY path")]
    assert gens == [1, 2, 2]  # data.tar.zst unchanged since 1; new.txt and notes.txt recorded by 2
    (hist,) = conn.execute("SELECT blake3 FROM file_history WHERE path = 'exp02/notes.txt'").fetchone()
    assert hist == old


def test_log_lists_every_run_with_its_counts(exp02, vault):
    root, db = exp02
    (root / "exp02/notes.txt").unlink()
    (root / "exp02/new.txt").write_text("added\n")
    flip_byte(root / "exp02/data.tar.zst", 6_000_000)
    vault("--catalog", str(db), "index", str(root))
    r = vault("--catalog", str(db), "index", str(root))  # nothing read, and still flagged from generation 2
    assert r.code == 5 and "1 still flagged" in r.out
    r = vault("--catalog", str(db), "log", "--json")
    assert r.code == 0, r.err
    runs = json.loads(r.out)["generations"]
    assert [g["generation"] for g in runs] == [1, 2, 3]
    first, second, third = runs
    assert first["mirrors"] == [root.name] and first["added"] == 2 and first["read"] == 2
    assert (second["added"], second["removed"], second["changed_in_place"], second["newly_damaged"]) == (1, 1, 1, 1)
    assert second["seen"] == 2 and third["read"] == 0 and third["changed_in_place"] == 0
    r = vault("--catalog", str(db), "log")
    assert r.code == 0 and "generation 2" in r.out and "1 changed in place" in r.out
    os.chmod(root / "exp02/data.tar.zst", 0o640)  # a new ctime: read again, still damaged, not newly
    vault("--catalog", str(db), "index", "--quiet", str(root))
    fourth = json.loads(vault("--catalog", str(db), "log", "--json").out)["generations"][-1]
    assert (fourth["read"], fourth["newly_damaged"]) == (1, 0)


def test_diff_names_what_changed_between_two_generations_files_and_members(exp02, tmp_path, vault):
    require("tar")
    root, db = exp02
    notes = root / "exp02/notes.txt"
    notes.write_text("rewritten\n")
    os.utime(notes, (1_800_000_000, 1_800_000_000))
    (root / "exp02/new.txt").write_text("added\n")
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub/a.txt").write_text("a\n")
    subprocess.run(["tar", "-C", str(src), "--zstd", "-cf", str(root / "exp02/extra.tar.zst"), "."], check=True)
    vault("--catalog", str(db), "index", "--quiet", str(root))  # generation 2
    (src / "sub/a.txt").write_text("a, changed\n")
    (src / "sub/b.txt").write_text("b\n")
    subprocess.run(["tar", "-C", str(src), "--zstd", "-cf", str(root / "exp02/extra.tar.zst"), "."], check=True)
    os.utime(root / "exp02/extra.tar.zst", (1_900_000_000, 1_900_000_000))
    (root / "exp02/new.txt").unlink()
    flip_byte(root / "exp02/data.tar.zst", 6_000_000)
    vault("--catalog", str(db), "index", "--quiet", str(root))  # generation 3

    r = vault("--catalog", str(db), "diff", "--json")  # the last two: 2 -> 3
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert (d["from"], d["to"]) == (2, 3)
    assert d["removed"] == ["exp02/new.txt"]
    assert "exp02/extra.tar.zst" in d["modified"]
    assert "exp02/extra.tar.zst/sub/b.txt" in d["added"] and "exp02/extra.tar.zst/sub/a.txt" in d["modified"]
    assert d["changed_in_place"] == ["exp02/data.tar.zst"]
    r = vault("--catalog", str(db), "diff", "1", "2", "--json")
    d = json.loads(r.out)
    assert set(d["added"]) >= {"exp02/new.txt", "exp02/extra.tar.zst", "exp02/extra.tar.zst/sub/a.txt"}
    assert d["modified"] == ["exp02/notes.txt"] and d["removed"] == [] and d["changed_in_place"] == []
    r = vault("--catalog", str(db), "diff", "1", "3")
    assert r.code == 0
    assert "+    exp02/extra.tar.zst/sub/b.txt" in r.out and "M    exp02/notes.txt" in r.out
    assert "C    exp02/data.tar.zst" in r.out
    r = vault("--catalog", str(db), "diff", "1", "9")
    assert r.code == 3 and "generation 9" in r.err


def test_verify_never_says_all_match_for_an_archive_flagged_damaged(tmp_path, vault):
    """Bytes after the last frame that are no frame: every member was read and hashes as recorded, yet the archive
    is flagged damaged, so verify names it and exits 5."""
    require("tar")
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a\n")
    entry = tmp_path / "m/exp03"
    entry.mkdir(parents=True)
    subprocess.run(["tar", "-C", str(src), "--zstd", "-cf", str(entry / "x.tar.zst"), "."], check=True)
    with open(entry / "x.tar.zst", "ab") as fh:
        fh.write(b"not a zstd frame")
    db = tmp_path / "cat.db"
    assert vault("--catalog", str(db), "index", "--quiet", str(tmp_path / "m")).code == 5
    r = vault("--catalog", str(db), "verify", "exp03")
    assert r.code == 5 and "all match" not in r.out
    assert "FLAGGED exp03/x.tar.zst: corrupt frame" in r.out
    r = vault("--catalog", str(db), "verify", "exp03", "--json")
    assert json.loads(r.out)["flagged"][0]["path"] == "exp03/x.tar.zst"


def test_an_archive_changed_in_place_that_still_decodes_refuses_its_changed_members_before_any_byte(tmp_path, vault):
    """No zstd checksum, a byte of a member's stored (raw) bytes changed: every frame decodes, the scan reads on.
    The member whose bytes changed is refused by extract -o - before a byte is written; the others extract."""
    import io
    import random
    import tarfile

    import zstandard

    buf = io.BytesIO()
    rng = random.Random(5)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in ("a.bin", "b.bin"):
            data = rng.randbytes(200_000)  # random: zstd stores it raw
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    entry = tmp_path / "m/exp04"
    entry.mkdir(parents=True)
    archive = entry / "x.tar.zst"
    archive.write_bytes(zstandard.ZstdCompressor(write_checksum=False).compress(buf.getvalue()))
    db = tmp_path / "cat.db"
    assert vault("--catalog", str(db), "index", "--quiet", str(tmp_path / "m")).code == 0
    blob = archive.read_bytes()
    at = blob.index(buf.getvalue()[512 * 3 + 200_000 - 100 : 512 * 3 + 200_000 - 84])  # inside b.bin, stored raw
    flip_byte(archive, at)
    r = vault("--catalog", str(db), "index", str(tmp_path / "m"))
    assert r.code == 5 and "1 changed in place" in r.out
    r = vault("--catalog", str(db), "extract", "exp04", "b.bin", "-o", "-")
    assert r.code == 5 and r.out == "" and "b.bin" in r.err and "changed in place" in r.err
    r = vault("--catalog", str(db), "extract", "exp04", "a.bin", "-o", str(tmp_path / "out"))
    assert r.code == 0 and (tmp_path / "out/a.bin").stat().st_size == 200_000


def test_accept_of_a_path_in_no_mirror_is_one_usage_line(exp02, tmp_path, vault):
    root, db = exp02
    r = vault("--catalog", str(db), "index", "--accept", str(tmp_path / "elsewhere.txt"), str(root))
    assert r.code == 2 and "--accept" in r.err and "elsewhere.txt" in r.err and len(r.err.strip().splitlines()) == 1
    r = vault("--catalog", str(db), "index", "--accept", "exp02/notes.txt", str(root))  # relative to the root
    assert r.code == 0, r.err
