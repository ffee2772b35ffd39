"""`vault extract`: members out of real archives, byte-identical to GNU tar, verified, atomic and safe."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import tarfile
from pathlib import Path

import pytest
from archives import assert_same_tree, compress, gnu_tar, hostile_archive, make_tree, python_tar
from conftest import require


def _indexed(tmp_path, vault, how: str, fmt: str = "gnu", big: int = 3 << 20):
    require("tar")
    require("zstd")
    require("pzstd")
    src = make_tree(tmp_path / "src", non_utf8=False, big=big)
    (tmp_path / "m/018_x/data").mkdir(parents=True)
    tar_path = tmp_path / "a.tar"
    python_tar(src, tar_path) if fmt == "python" else gnu_tar(src, tar_path, fmt)
    archive = compress(tar_path, tmp_path / "m/018_x/data/a.tar.zst", how)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    return db, src, archive


@pytest.mark.parametrize("how,fmt", [("zstd", "gnu"), ("pzstd", "gnu"), ("python", "python"), ("zstd-T0", "posix")])
def test_every_member_round_trips_byte_for_byte(tmp_path, vault, how, fmt):
    db, src, archive = _indexed(tmp_path, vault, how, fmt)
    out = tmp_path / "out"
    r = vault("--catalog", str(db), "extract", "018", "*", "-o", str(out), "--keep-path", "--json")
    assert r.code == 0, r.err
    ref = tmp_path / "ref"
    ref.mkdir()
    subprocess.run(["tar", "-I", "zstd", "-C", str(ref), "-xf", str(archive)], check=True)
    assert_same_tree(ref, out)
    assert not list(out.rglob(".*.tmp"))


def test_multiframe_extract_reads_only_the_frames_that_hold_the_member(tmp_path, vault):
    db, src, archive = _indexed(tmp_path, vault, "python", "python", big=6 << 20)
    conn = sqlite3.connect(db)
    frames = conn.execute("SELECT count(*) FROM frames").fetchone()[0]
    assert frames >= 6
    r = vault("--catalog", str(db), "extract", "018", "logs/run.log", "-o", str(tmp_path / "o"), "--json")
    doc = json.loads(r.out)
    assert (tmp_path / "o/run.log").read_text() == "step 1\nstep 2\n"
    assert doc["bytes_decompressed"] <= 2 << 20  # one or two 1 MiB frames, not the 6 MiB archive


def test_single_frame_extract_stops_at_the_members_end(tmp_path, vault):
    db, src, archive = _indexed(tmp_path, vault, "zstd", big=6 << 20)
    conn = sqlite3.connect(db)
    path, offset, size = conn.execute(
        "SELECT path, data_offset, size FROM members WHERE type = 'file' ORDER BY data_offset LIMIT 1"
    ).fetchone()
    total = conn.execute("SELECT raw_size FROM archives").fetchone()[0]
    assert offset + size + (1 << 20) < total  # the archive goes on well past the member
    r = vault("--catalog", str(db), "extract", "018", path, "-o", str(tmp_path / "o"), "--json")
    assert r.code == 0
    assert json.loads(r.out)["bytes_decompressed"] <= offset + size + (1 << 20)


def test_stdout_mode_and_suffix_and_path_through_archive(tmp_path, vault):
    db, src, archive = _indexed(tmp_path, vault, "pzstd")
    r = vault("--catalog", str(db), "extract", "018", "run.log", "-o", "-")
    assert r.code == 0 and r.out == "step 1\nstep 2\n"
    r = vault("--catalog", str(db), "extract", "018", "data/a.tar.zst/logs/run.log", "-o", "-")
    assert r.out == "step 1\nstep 2\n"
    r = vault("--catalog", str(db), "extract", "018", "logs/run.log", "--archive", "a", "-o", "-")
    assert r.out == "step 1\nstep 2\n"


def test_plain_file_of_the_mirror_is_copied_and_verified(demo_catalog, tmp_path, vault):
    r = vault(
        "--catalog", str(demo_catalog), "extract", "014", "data/20260925_070231/per_request.csv", "-o", str(tmp_path)
    )
    assert r.code == 0
    rows = (tmp_path / "per_request.csv").read_text().splitlines()
    assert len(rows) == 25 and "670bf1c4bb02136c067d2341" in "".join(rows)


def test_missing_ambiguous_and_existing_destinations(demo_catalog, tmp_path, vault):
    db = str(demo_catalog)
    missing = vault("--catalog", db, "extract", "018", "no_such_member.json")
    assert missing.code == 3 and "closest" in missing.err
    folder = vault("--catalog", db, "extract", "018", "dumps/run10", "-o", str(tmp_path / "a"), "--json")
    assert folder.code == 0 and len(json.loads(folder.out)["written"]) == 8  # a folder across 4 archives
    assert vault("--catalog", db, "extract", "019", "meta.json").code == 3
    first = vault("--catalog", db, "extract", "018", "compaction_meta.json", "-o", str(tmp_path))
    assert first.code == 0
    again = vault("--catalog", db, "extract", "018", "compaction_meta.json", "-o", str(tmp_path))
    assert again.code == 2 and "--force" in again.err
    assert vault("--catalog", db, "extract", "018", "compaction_meta.json", "-o", str(tmp_path), "--force").code == 0


def test_bit_flip_inside_a_members_frame_is_exit_5_and_leaves_nothing(tmp_path, vault):
    db, src, archive = _indexed(tmp_path, vault, "python", "python", big=6 << 20)
    conn = sqlite3.connect(db)
    offset = conn.execute("SELECT data_offset FROM members WHERE path = 'dumps/big.bin'").fetchone()[0]
    comp, raw = conn.execute(
        "SELECT comp_offset, raw_offset FROM frames WHERE raw_offset <= ? ORDER BY idx DESC LIMIT 1", (offset,)
    ).fetchone()
    data = bytearray(archive.read_bytes())
    data[comp + 200] ^= 0x01
    st = archive.stat()
    archive.write_bytes(bytes(data))
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime: only the hash can tell
    out = tmp_path / "o"
    r = vault("--catalog", str(db), "extract", "018", "dumps/big.bin", "-o", str(out))
    assert r.code == 5
    assert not out.exists() or not any(out.iterdir())


def test_archive_changed_or_truncated_since_indexing_is_refused(tmp_path, vault):
    db, src, archive = _indexed(tmp_path, vault, "zstd")
    data = archive.read_bytes()
    with open(archive, "ab") as fh:
        fh.write(b"\0" * 16)
    r = vault("--catalog", str(db), "extract", "018", "logs/run.log", "-o", "-")
    assert r.code == 5 and "re-index 018_x" in r.err
    archive.write_bytes(data[: len(data) // 2])  # truncated, as a copy cut short would be
    out = tmp_path / "o"
    r = vault("--catalog", str(db), "extract", "018", "dumps/big.bin", "-o", str(out))
    assert r.code == 5 and "re-index" in r.err
    assert not out.exists() or list(out.iterdir()) == []


def test_hostile_members_are_refused_and_nothing_lands_outside(tmp_path, vault):
    links = (
        ("etc_link", "/etc", tarfile.SYMTYPE),
        ("hard_out", "../../outside", tarfile.LNKTYPE),
    )
    files = ("../escape.txt", "/etc/x_evil")
    hostile_archive(tmp_path / "m/019_x/h.tar.zst", files, links)
    with tarfile.open(tmp_path / "through.tar", "w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("etc_link/passwd")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    compress(tmp_path / "through.tar", tmp_path / "m/019_x/through.tar.zst", "python")
    db = tmp_path / "c.db"
    vault("--catalog", str(db), "index", "-q", str(tmp_path / "m"))
    dest = tmp_path / "d" / "e"
    dest.mkdir(parents=True)
    for name in ("../escape.txt", "/etc/x_evil", "hard_out"):
        r = vault("--catalog", str(db), "extract", "019", name, "-o", str(dest), "--keep-path")
        assert r.code == 5 and "refusing" in r.err, name
    assert vault("--catalog", str(db), "extract", "019", "etc_link", "-o", str(dest)).code == 5
    assert list(dest.iterdir()) == []
    passwd = Path("/etc/passwd").read_bytes()
    made = vault("--catalog", str(db), "extract", "019", "etc_link", "-o", str(dest), "--allow-outside-links")
    assert made.code == 0 and os.readlink(dest / "etc_link") == "/etc"
    r = vault("--catalog", str(db), "extract", "019", "etc_link/passwd", "-o", str(dest), "--keep-path", "--force")
    assert r.code == 5 and "outside the destination" in r.err
    assert Path("/etc/passwd").read_bytes() == passwd
    assert not (tmp_path / "d/escape.txt").exists() and not Path("/etc/x_evil").exists()


def test_disk_full_is_a_clean_error_with_no_partial_file(tmp_path, vault):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    db, src, archive = _indexed(tmp_path, vault, "zstd", big=3 << 20)
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        r = vault("--catalog", str(db), "extract", "018", "dumps/big.bin", "-o", str(mnt))
        assert r.code == 6 and "no space" in r.err
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
