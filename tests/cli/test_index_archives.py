"""Indexing real archives: every member's offsets and BLAKE3 match what GNU tar extracts."""

from __future__ import annotations

import os
import sqlite3
import subprocess

import blake3
import pytest
from archives import NON_UTF8, compress, extracted_hashes, gnu_tar, make_tree, python_tar
from conftest import require

CASES = [
    ("gnu", "zstd"),
    ("gnu", "pzstd"),
    ("posix", "zstd-T0"),
    ("posix", "zstd-long27"),
    ("ustar", "zstd"),
    ("python", "python"),
    ("python", "pzstd"),
    ("gnu", "python"),
]


def _catalog_members(db):
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT coalesce(m.raw_path, CAST(m.path AS BLOB)), m.path, m.type, m.size, m.blake3, m.data_offset, "
        "m.link_target FROM members m"
    ).fetchall()
    return conn, rows


@pytest.mark.parametrize("fmt,how", CASES)
def test_every_member_hash_matches_gnu_tar_extraction(tmp_path, vault, fmt, how):
    require("tar")
    require("zstd")
    require("pzstd")
    src = make_tree(tmp_path / "src", long_names=fmt != "ustar", non_utf8=fmt != "ustar")
    mirror = tmp_path / "mirror" / "018_demo" / "data"
    mirror.mkdir(parents=True)
    tar_path = tmp_path / "a.tar"
    python_tar(src, tar_path) if fmt == "python" else gnu_tar(src, tar_path, fmt)
    archive = compress(tar_path, mirror / "a.tar.zst", how)
    db = tmp_path / "cat.db"
    result = vault("--catalog", str(db), "index", "--quiet", str(tmp_path / "mirror"))
    assert result.code == 0, result.err
    expected = extracted_hashes(archive, tmp_path / "out")
    conn, rows = _catalog_members(db)
    files = {}
    for raw, _path, mtype, _size, digest, _offset, _link in rows:
        key = raw[2:] if raw.startswith(b"./") else raw
        if mtype in ("file", "hardlink"):
            files[key] = digest
    assert files == expected
    tar_bytes = tar_path.read_bytes()
    for _raw, path, mtype, size, digest, data_offset, _link in rows:
        if mtype == "file":
            assert blake3.blake3(tar_bytes[data_offset : data_offset + size]).hexdigest() == digest, path
    types = {path: mtype for _raw, path, mtype, *_ in rows}
    assert types["link_to_log"] == "symlink"
    assert types["hardlink_to_log"] in ("hardlink", "file")
    assert types["empty.txt"] == "file"
    if fmt != "ustar":
        assert any(len(p.encode()) > 255 for p in types)
        raws = [r[0] for r in conn.execute("SELECT raw_path FROM members WHERE raw_path IS NOT NULL")]
        assert any(r.endswith(NON_UTF8) for r in raws)
    frames = conn.execute("SELECT count(*), sum(raw_size) FROM frames").fetchone()
    assert frames[1] == os.path.getsize(tar_path)
    if how in ("python",):
        assert frames[0] > 1
    status = conn.execute("SELECT status, member_count FROM archives").fetchone()
    assert status == ("ok", len(rows))


def test_member_hashes_agree_with_b3sum(tmp_path, vault):
    require("b3sum")
    require("zstd")
    src = make_tree(tmp_path / "src", non_utf8=False)
    (tmp_path / "m/018_x").mkdir(parents=True)
    gnu_tar(src, tmp_path / "a.tar", "gnu")
    compress(tmp_path / "a.tar", tmp_path / "m/018_x/a.tar.zst", "zstd")
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    digest = sqlite3.connect(db).execute("SELECT blake3 FROM members WHERE path = 'dumps/big.bin'").fetchone()[0]
    out = subprocess.run(["b3sum", "--no-names", str(src / "dumps/big.bin")], capture_output=True, text=True)
    assert out.stdout.strip() == digest
    archive_digest = sqlite3.connect(db).execute("SELECT blake3 FROM files WHERE path LIKE '%a.tar.zst'").fetchone()[0]
    out = subprocess.run(["b3sum", "--no-names", str(tmp_path / "m/018_x/a.tar.zst")], capture_output=True, text=True)
    assert out.stdout.strip() == archive_digest


def test_pzstd_archive_records_a_frame_table_that_resumes_mid_file(tmp_path, vault):
    require("pzstd")
    raw = tmp_path / "payload.bin"
    raw.write_bytes(os.urandom(20 << 20))
    (tmp_path / "m/018_x").mkdir(parents=True)
    src = tmp_path / "src"
    src.mkdir()
    os.replace(raw, src / "payload.bin")
    gnu_tar(src, tmp_path / "a.tar", "gnu")
    archive = compress(tmp_path / "a.tar", tmp_path / "m/018_x/a.tar.zst", "pzstd")
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    frames = sqlite3.connect(db).execute("SELECT comp_offset, raw_offset FROM frames ORDER BY idx").fetchall()
    assert len(frames) >= 2
    from cloudvault.archive.zstdframes import FrameStream

    comp, rawoff = frames[-1]
    with open(archive, "rb") as fh:
        got = FrameStream(fh, comp_offset=comp, raw_offset=rawoff).read(4096)
    assert got == (tmp_path / "a.tar").read_bytes()[rawoff : rawoff + 4096]


def test_a_large_one_block_xz_is_said_in_the_summary_and_once_by_show_and_extract(tmp_path, vault):
    """Issue 36: one xz block has no seek point inside it, so each member is decoded from the archive's start; the
    index summary names such archives, and show and extract say it once on stderr for one past 64 MiB. One written
    by `xz -T2 --block-size` (several blocks) and a small one-block one say nothing there."""
    require("tar")
    require("xz")
    src = tmp_path / "src"
    src.mkdir()
    (src / "small.txt").write_text("small\n")
    (src / "zeros.bin").write_bytes(bytes(65 << 20))
    (src / "tiny.txt").write_text("tiny\n")
    data = tmp_path / "m/018_x/data"
    data.mkdir(parents=True)
    for name, xz in (("one.tar.xz", "xz -0 -T1"), ("blocks.tar.xz", "xz -0 -T2 --block-size=16MiB")):
        subprocess.run(f"tar -cf - small.txt zeros.bin | {xz} > {data / name}", shell=True, cwd=src, check=True)
    subprocess.run(["tar", "-cJf", str(data / "little.tar.xz"), "tiny.txt"], cwd=src, check=True)
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", str(tmp_path / "m"))
    assert r.code == 0, r.out + r.err
    assert (
        "  2 .tar.xz in one xz block, each member decoded from the archive's start (`xz -T0` or "
        "`xz --block-size=16MiB` makes one seekable): 018_x/data/little.tar.xz, 018_x/data/one.tar.xz\n"
    ) in r.out
    note = ("vault: note: 018_x/data/one.tar.xz is one xz block (65.0 MB decompressed): each member is decoded from "
            "the archive's start; `xz -T0` or `xz --block-size=16MiB` makes it seekable\n")  # fmt: skip
    shown = vault("--catalog", db, "show", "018")
    assert shown.code == 0 and shown.err == note, shown.err
    one = vault("--catalog", db, "extract", "018", "small.txt", "--archive", "one.tar.xz", "-o", "-")
    assert one.code == 0 and one.out == "small\n" and one.err.count(note) == 1, one.err
    for archive, name in (("blocks.tar.xz", "small.txt"), ("little.tar.xz", "tiny.txt")):
        quiet = vault("--catalog", db, "extract", "018", name, "--archive", archive, "-o", "-")
        assert quiet.code == 0 and "xz block" not in quiet.err, quiet.err
