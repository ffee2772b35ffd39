"""Damaged archives in other formats than .tar.zst, handled as a damaged .tar.zst is: a truncated gzip, bzip2 or xz,
a bad CRC, bytes that are no stream are named flags (exit 5), the members before the damage are kept with the
hashes the bytes `tarfile` reads give; and what vault does not open (.rar, .7z, a multi-volume set) is counted and
named in the summary, its bytes hashed as a plain file's."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import sqlite3
import tarfile

import blake3
import pytest

SIZES = [200_000 + i * 7919 for i in range(24)]  # a few MB, members across many gzip/bzip2 blocks


def _tar() -> bytes:
    """A tar of members whose bytes compress (so a cut or a flip lands inside compressed data, not stored)."""
    buf = io.BytesIO()
    words = b"alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu "
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for i, size in enumerate(SIZES):
            data = (words * (size // len(words) + 1))[:size].replace(b"alpha", b"%05d" % i)
            info = tarfile.TarInfo(f"m/{i:02d}.txt")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _truth(tar: bytes) -> dict[str, str]:
    """member name -> BLAKE3 of the bytes Python's tarfile extracts."""
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        return {m.name: blake3.blake3(tf.extractfile(m).read()).hexdigest() for m in tf}


TAR = _tar()
TRUTH = _truth(TAR)
COMPRESS = {".tar.gz": gzip.compress, ".tar.bz2": bz2.compress, ".tar.xz": lzma.compress}


def _index(tmp_path, vault, name: str, data: bytes, code: int = 5):
    (tmp_path / "m/018_d").mkdir(parents=True)
    (tmp_path / "m/018_d" / name).write_bytes(data)
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", "--json", str(tmp_path / "m"))
    assert r.code == code, r.err
    conn = sqlite3.connect(db)
    status, fmt = conn.execute("SELECT status, format FROM archives").fetchone()
    flags = [kind for (kind,) in conn.execute("SELECT kind FROM flags")]
    members = dict(conn.execute("SELECT path, blake3 FROM members WHERE type = 'file'"))
    conn.close()
    return status, fmt, flags, members, json.loads(r.out)


def _kept_as_tar_reads_them(members: dict[str, str]) -> None:
    assert members, "the members before the damage are kept"
    assert all(TRUTH[path] == digest for path, digest in members.items())


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_truncated_archive_is_flagged_and_the_members_before_the_cut_kept(tmp_path, vault, tally, suffix):
    tally("corruption")
    whole = COMPRESS[suffix](TAR)
    status, fmt, flags, members, report = _index(tmp_path, vault, "cut" + suffix, whole[: len(whole) * 2 // 3])
    assert status == "truncated" and "truncated" in flags and report["damaged"]
    assert fmt == "tar" + suffix[4:]
    _kept_as_tar_reads_them(members)
    assert 0 < len(members) < len(SIZES)


def test_a_gzip_whose_crc_does_not_match_is_bad_crc_its_members_kept(tmp_path, vault, tally):
    tally("corruption")
    data = bytearray(gzip.compress(TAR))
    data[-8] ^= 0xFF  # the CRC32 of the trailer
    status, _, flags, members, _ = _index(tmp_path, vault, "crc.tgz", bytes(data))
    assert status == "bad_crc" and flags.count("bad_crc") == 1
    _kept_as_tar_reads_them(members)


def test_a_bzip2_block_whose_crc_does_not_match_is_bad_crc(tmp_path, vault, tally):
    pytest.importorskip("indexed_bzip2")  # Python's bz2 says only "invalid data stream"
    tally("corruption")
    data = bytearray(bz2.compress(TAR, 1))
    block = data.find(b"\x31\x41\x59\x26\x53\x59", 100)  # the second block's magic: its CRC follows
    data[block + 6] ^= 0x01
    status, _, flags, members, _ = _index(tmp_path, vault, "crc.tar.bz2", bytes(data))
    assert status == "bad_crc" and "bad_crc" in flags
    _kept_as_tar_reads_them(members)


def test_an_xz_whose_data_is_damaged_is_corrupt_stream_and_the_members_before_it_kept(tmp_path, vault, tally):
    tally("corruption")
    data = bytearray(lzma.compress(TAR))
    data[len(data) // 2] ^= 0x55
    status, _, flags, members, _ = _index(tmp_path, vault, "flip.tar.xz", bytes(data))
    assert status == "corrupt_stream" and status in flags
    _kept_as_tar_reads_them(members)


def test_an_xz_block_whose_check_does_not_match_is_bad_crc(tmp_path, vault, tally):
    """lzma says only "corrupt input data"; the blocks' data decoding whole (raw) says it was the check."""
    tally("corruption")
    data = bytearray(lzma.compress(TAR, check=lzma.CHECK_CRC64))
    index_size = (int.from_bytes(data[-8:-4], "little") + 1) * 4
    data[len(data) - 12 - index_size - 1] ^= 0x01  # the last byte of the block's CRC64, just before the index
    status, _, flags, members, _ = _index(tmp_path, vault, "crc.tar.xz", bytes(data))
    assert status == "bad_crc" and "bad_crc" in flags
    _kept_as_tar_reads_them(members)


def test_bytes_after_the_last_gzip_member_are_flagged_not_ignored(tmp_path, vault, tally):
    tally("corruption")
    status, _, flags, members, _ = _index(tmp_path, vault, "tail.tgz", gzip.compress(TAR) + b"junk at the end\n")
    assert status == "corrupt_stream" and "corrupt_stream" in flags
    assert members == TRUTH


def test_a_damaged_gzip_says_one_line_when_a_member_is_extracted(tmp_path, vault, tally):
    tally("corruption")
    data = gzip.compress(TAR)
    _index(tmp_path, vault, "cut.tgz", data[: len(data) // 2])
    r = vault("--catalog", str(tmp_path / "c.db"), "extract", "018", "m/00.txt", "-o", str(tmp_path / "out"))
    assert r.code == 5 and r.err.count("\n") == 1 and "truncated" in r.err and "Traceback" not in r.err


def test_formats_vault_does_not_open_are_counted_and_named_in_the_summary(tmp_path, vault, tally):
    tally("hostile_input")
    (tmp_path / "m/018_o").mkdir(parents=True)
    (tmp_path / "m/018_o/a.rar").write_bytes(b"Rar!\x1a\x07\x01\x00" + bytes(40))
    (tmp_path / "m/018_o/b.7z").write_bytes(b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(40))
    (tmp_path / "m/018_o/c.7z").write_bytes(b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(41))
    (tmp_path / "m/018_o/set.7z.001").write_bytes(b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(42))
    (tmp_path / "m/018_o/notes.txt").write_text("not an archive\n")
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", str(tmp_path / "m"))
    assert r.code == 0, r.err
    assert "4 archives in formats vault does not open: .7z x2, .rar x1, multi-volume x1" in r.out
    doc = json.loads(vault("--catalog", str(tmp_path / "c2.db"), "index", "--json", str(tmp_path / "m")).out)
    assert doc["not_opened"] == {".7z": 2, ".rar": 1, "multi-volume": 1}
    conn = sqlite3.connect(db)  # still files of the mirror: hashed, listed, extractable whole
    assert conn.execute("SELECT count(*) FROM files WHERE blake3 IS NOT NULL").fetchone()[0] == 5
    assert conn.execute("SELECT count(*) FROM archives").fetchone()[0] == 0
