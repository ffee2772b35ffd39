"""`vault verify` finds bit rot; `vault optimize` makes single-frame archives seekable without touching the mirror."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3

from archives import compress, gnu_tar
from conftest import require


def _single_frame_mirror(tmp_path, vault, raw_mb: int = 24, optimize: bool = False):
    require("zstd")
    src = tmp_path / "src"
    (src / "dumps").mkdir(parents=True)
    for i in range(raw_mb // 4):
        (src / f"dumps/part{i:02d}.bin").write_bytes(os.urandom(2 << 20) + bytes(2 << 20))
    (src / "dumps/last.json").write_text('{"end": true}\n')
    (tmp_path / "m/018_x").mkdir(parents=True)
    gnu_tar(src, tmp_path / "a.tar", "gnu")
    archive = compress(tmp_path / "a.tar", tmp_path / "m/018_x/big.tar.zst", "zstd-T0")
    db = tmp_path / "c.db"
    args = ["--catalog", str(db), "index", "-q", str(tmp_path / "m")] + (["--optimize"] if optimize else [])
    assert vault(*args).code == 0
    return db, src, archive


def test_verify_names_a_flipped_byte_in_a_plain_file_and_in_an_archive(demo_mirror, tmp_path, vault):
    mirror = tmp_path / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(mirror)).code == 0
    assert vault("--catalog", str(db), "verify").code == 0
    csv = mirror / "014_ss20_temp0_chunk1024/data/20260925_070231/per_request.csv"
    csv.write_text(csv.read_text().replace("8,192", "8,193").replace("8192", "8193"))
    archive = mirror / "019_aicluster_dump_debugger/data/score_block_n82.tar.zst"
    data = bytearray(archive.read_bytes())
    data[len(data) // 3] ^= 0x10
    archive.write_bytes(bytes(data))
    r = vault("--catalog", str(db), "verify", "--json")
    assert r.code == 5
    bad = json.loads(r.out)["mismatches"]
    paths = {m["path"] for m in bad}
    assert "014_ss20_temp0_chunk1024/data/20260925_070231/per_request.csv" in paths
    assert "019_aicluster_dump_debugger/data/score_block_n82.tar.zst" in paths
    assert all(m["expected"] and len(m["expected"]) == 64 for m in bad)
    text = vault("--catalog", str(db), "verify", "019")
    assert text.code == 5 and "MISMATCH" in text.out


def test_verify_sample_reads_members_by_seeking_and_catches_damage(tmp_path, vault):
    db, src, archive = _single_frame_mirror(tmp_path, vault, raw_mb=8)
    assert vault("--catalog", str(db), "verify", "--sample", "100%").code == 0
    st = archive.stat()
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0x01
    archive.write_bytes(bytes(data))
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = vault("--catalog", str(db), "verify", "--sample", "100%", "--json")
    assert r.code == 5 and json.loads(r.out)["mismatches"]
    assert vault("--catalog", str(db), "verify", "--sample", "0").code == 2
    assert vault("--catalog", str(db), "verify", "--sample", "lots").code == 2


def test_optimize_makes_a_seekable_copy_that_extract_uses_and_falls_back_without(tmp_path, vault):
    db, src, archive = _single_frame_mirror(tmp_path, vault)
    before = archive.stat()
    target = ["--catalog", str(db), "extract", "018", "dumps/last.json", "-o", str(tmp_path / "o"), "--json", "--force"]
    slow = json.loads(vault(*target).out)["bytes_decompressed"]
    r = vault("--catalog", str(db), "optimize", "--json")
    assert r.code == 0
    written = json.loads(r.out)["written"]
    assert len(written) == 1 and written[0]["frames"] >= 6
    copy = written[0]["copy"]
    assert copy.startswith(str(tmp_path / "c.db.cache"))
    fast = json.loads(vault(*target).out)["bytes_decompressed"]
    assert (tmp_path / "o/last.json").read_text() == '{"end": true}\n'
    assert fast <= 4 << 20 < slow
    assert archive.stat().st_mtime_ns == before.st_mtime_ns and archive.stat().st_size == before.st_size
    status = json.loads(vault("--catalog", str(db), "optimize", "--status", "--json").out)
    assert status["copies"][0]["present"] and status["bytes_used"] == os.path.getsize(copy)
    os.unlink(copy)
    again = json.loads(vault(*target).out)
    assert again["bytes_decompressed"] == slow  # the original, still verified
    for p in (src / "dumps").iterdir():
        out = vault("--catalog", str(db), "extract", "018", f"dumps/{p.name}", "-o", str(tmp_path / "all"), "--force")
        assert out.code == 0 and (tmp_path / "all" / p.name).read_bytes() == p.read_bytes()


def test_optimize_respects_max_gb(tmp_path, vault):
    db, _, _ = _single_frame_mirror(tmp_path, vault)
    r = json.loads(vault("--catalog", str(db), "optimize", "--max-gb", "0.000001", "--json").out)
    assert r["written"] == [] and "budget" in r["skipped"][0]["why"]


def test_index_optimize_writes_the_copy_in_the_same_pass(tmp_path, vault):
    db, src, archive = _single_frame_mirror(tmp_path, vault, optimize=True)
    conn = sqlite3.connect(db)
    ((path, frames),) = conn.execute("SELECT path, frame_count FROM seekable").fetchall()
    assert frames >= 6 and os.path.exists(path)
    assert not list((tmp_path / "c.db.cache/seekable").glob(".*.tmp"))
    r = vault("--catalog", str(db), "extract", "018", "dumps/last.json", "-o", "-", "--json")
    assert json.loads(r.out) == {"end": True}  # stdout carries the member itself, not a report
    out = vault("--catalog", str(db), "extract", "018", "dumps/part00.bin", "-o", str(tmp_path / "x"), "--json")
    assert json.loads(out.out)["bytes_decompressed"] <= 8 << 20
    assert (tmp_path / "x/part00.bin").read_bytes() == (src / "dumps/part00.bin").read_bytes()


def _multiframe_mirror(tmp_path, vault, how: str = "python"):
    """An archive of 12 random 300 KB files in ~1 MiB frames (Python's compressor), indexed."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(12):
        (src / f"f{i:02d}.bin").write_bytes(os.urandom(300_000))
    (tmp_path / "m/018_x").mkdir(parents=True)
    gnu_tar(src, tmp_path / "a.tar", "gnu")
    archive = compress(tmp_path / "a.tar", tmp_path / "m/018_x/a.tar.zst", how)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    return db, archive


def _damage_frame(db, archive, idx: int) -> set[str]:
    """Make frame idx undecodable (a reserved block type in its first block), size and mtime kept; the members
    whose data lies (partly) in that frame, which are exactly the ones whose bytes are now lost."""
    conn = sqlite3.connect(db)
    frames = conn.execute("SELECT comp_offset, raw_offset, raw_size FROM frames ORDER BY idx").fetchall()
    assert len(frames) > idx + 1
    comp, raw, raw_size = frames[idx]
    st = archive.stat()
    data = bytearray(archive.read_bytes())
    from cloudvault.archive.zstdframes import frame_header_size

    data[comp + frame_header_size(data[comp + 4])] |= 0x06  # block type 3: reserved, refused by every decoder
    archive.write_bytes(bytes(data))
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns))
    members = conn.execute("SELECT path, data_offset, size FROM members WHERE type = 'file'").fetchall()
    return {p for p, off, size in members if off < raw + raw_size and off + size > raw}


def test_verify_and_sample_name_exactly_the_members_of_a_damaged_frame(tmp_path, vault):
    require("tar")
    db, archive = _multiframe_mirror(tmp_path, vault)
    damaged = _damage_frame(db, archive, 1)
    assert damaged and len(damaged) < 12
    full = vault("--catalog", str(db), "verify", "018", "--json")
    assert full.code == 5
    named = {m["path"] for m in json.loads(full.out)["mismatches"] if m["archive"]}
    assert named == damaged
    sample = vault("--catalog", str(db), "verify", "--sample", "100%", "--json")
    assert sample.code == 5
    doc = json.loads(sample.out)
    assert {m["path"] for m in doc["mismatches"]} == damaged
    assert doc["checked_members"] == 12


def test_verify_sample_names_a_changed_archive_and_goes_on(tmp_path, vault):
    require("zstd")
    db, archive = _multiframe_mirror(tmp_path, vault)
    other = tmp_path / "m/019_y/b.tar.zst"
    other.parent.mkdir()
    other.write_bytes(archive.read_bytes())
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    with open(archive, "ab") as fh:
        fh.write(b"appended later")
    r = vault("--catalog", str(db), "verify", "--sample", "100%", "--json")
    assert r.code == 5
    doc = json.loads(r.out)
    assert doc["checked_members"] == 24
    assert {m["archive"] for m in doc["mismatches"]} == {"018_x/a.tar.zst"}
    assert all("changed since it was indexed" in m["why"] for m in doc["mismatches"])
    text = vault("--catalog", str(db), "verify", "--sample", "100%")
    assert text.code == 5 and "018_x/a.tar.zst" in text.out and "Traceback" not in text.err


def test_verify_checks_the_catalog_first_and_counts_what_it_could_not_check(tmp_path, vault):
    db, _ = _multiframe_mirror(tmp_path, vault)
    assert vault("--catalog", str(db), "verify").code == 0
    conn = sqlite3.connect(db)
    conn.execute("UPDATE files SET blake3 = NULL WHERE path LIKE '%a.tar.zst'")  # as an unreadable file leaves it
    conn.commit()
    r = vault("--catalog", str(db), "verify")
    assert r.code == 5 and "1 never hashed" in r.out and "all match" not in r.out
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX files_entry ON files(entry_id, mirror_id)' "
                 "WHERE name = 'files_entry'")  # fmt: skip
    conn.commit()
    conn.close()
    broken = vault("--catalog", str(db), "verify")
    assert broken.code == 5 and "integrity check" in broken.err and "Traceback" not in broken.err


def test_verify_sample_reads_the_mirror_not_the_seekable_copy(tmp_path, vault):
    db, _src, archive = _single_frame_mirror(tmp_path, vault, raw_mb=8, optimize=True)
    assert sqlite3.connect(db).execute("SELECT count(*) FROM seekable").fetchone()[0] == 1
    st = archive.stat()
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0x01  # bit rot in the mirror; the copy in the cache is still whole
    archive.write_bytes(bytes(data))
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = vault("--catalog", str(db), "verify", "--sample", "100%", "--json")
    assert r.code == 5 and json.loads(r.out)["mismatches"]
    extract = vault("--catalog", str(db), "extract", "018", "dumps/last.json", "-o", "-")
    assert extract.code == 0  # extraction still uses the whole copy


def test_verify_names_missing_files_and_archives(tmp_path, vault):
    db, archive = _multiframe_mirror(tmp_path, vault)
    note = tmp_path / "m/018_x/notes.txt"
    note.write_text("kept\n")
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    note.unlink()
    archive.unlink()
    r = vault("--catalog", str(db), "verify", "018", "--json")
    doc = json.loads(r.out)
    assert r.code == 5 and doc["checked_files"] == 2
    assert {(m["path"], m["why"]) for m in doc["mismatches"]} == {("018_x/notes.txt", "missing"),
                                                                   ("018_x/a.tar.zst", "missing")}  # fmt: skip


def test_the_scoped_file_reads_keep_one_entry_by_path_in_their_own_row_shape(demo_catalog):
    """hashed_files, unhashed_files (verify) and copy_candidates (optimize) share one scoped read of files."""
    from cloudvault.catalog.copies import Candidate, copy_candidates
    from cloudvault.catalog.integrity import HashedFile, hashed_files, unhashed_files

    conn = sqlite3.connect(demo_catalog)
    conn.execute("UPDATE files SET blake3 = NULL WHERE path LIKE '%/ENVIRONMENT.md'")  # as if unreadable when indexed
    scope = conn.execute("SELECT mirror_id, entry_id FROM files WHERE path LIKE '%inputs.tar.zst'").fetchone()
    ordered = "SELECT id, path, mirror_id, entry_id, blake3 FROM files WHERE kind = 'file' ORDER BY path"
    archives = {r[0] for r in conn.execute("SELECT file_id FROM archives WHERE status = 'ok'")}
    for within in (None, scope):
        files = [r for r in conn.execute(ordered) if within is None or (r[2], r[3]) == tuple(within)]
        hashed = hashed_files(conn, within)
        assert hashed and all(isinstance(f, HashedFile) for f in hashed)
        assert [f.file_id for f in hashed] == [r[0] for r in files if r[4] is not None]
        assert unhashed_files(conn, within) == [r[1] for r in files if r[4] is None]
        candidates = copy_candidates(conn, within)
        assert candidates and all(isinstance(c, Candidate) for c in candidates)
        assert [c.file_id for c in candidates] == [r[0] for r in files if r[0] in archives]
    assert len(unhashed_files(conn, None)) > 1 and len(copy_candidates(conn, None)) > len(candidates)


def test_verify_of_an_entry_as_indexed_loads_no_openssl_random_dataclasses_or_archive_scanner(demo_catalog):
    """`vault verify 013` (budget: 2x the import floor) hashes the entry's files and, its archives as indexed, reads
    nothing more: hashlib (OpenSSL, ~2 ms), random and the sample's keyed hash serve `--sample` only, and the archive
    scanner (with dataclasses, ~7 ms of imports) only an archive that changed. Run as a user runs it: a fresh
    interpreter, the modules it loaded (beyond the interpreter's own start) printed at its end."""
    import subprocess
    import sys

    code = (
        "import sys, atexit; before = set(sys.modules); from cloudvault.cli.main import main;"
        "atexit.register(lambda: print(sorted({'hashlib', '_hashlib', 'random', 'dataclasses', 'inspect',"
        " 'cloudvault.archive.scan'} & (set(sys.modules) - before)), file=sys.stderr));"
        f"sys.exit(main(['--catalog', {str(demo_catalog)!r}, 'verify', '013']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "[]"
