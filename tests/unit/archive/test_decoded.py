"""archive/decoded.py: a member of a big .tar.gz / .tar.bz2 / .tar.xz is read from the seek point before it (the
compressed bytes read are a small part of the file), the bytes are those the scan hashed, and without the optional
decoders everything still reads (from the start) and the index says what to install."""

from __future__ import annotations

import functools
import io
import os
import subprocess
import sys
import tarfile

import blake3
import pytest
from conftest import require

from cloudvault.archive.decoded import SeekPointReader, missing_library
from cloudvault.archive.scan import ArchiveScan

MEMBERS, MEMBER_SIZE = 24, 2 << 20  # 48 MiB of tar


def _tar(path) -> None:
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        for i in range(MEMBERS):
            data = os.urandom(MEMBER_SIZE // 2).hex().encode()  # about 2x compressible: many deflate blocks
            info = tarfile.TarInfo(f"dump/{i:02d}.hex")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    work = tmp_path_factory.mktemp("big")
    _tar(work / "a.tar")
    return work


class Counting(io.FileIO):
    """A file that counts the bytes read from it."""

    read_total = 0

    def read(self, n=-1):
        data = super().read(n)
        Counting.read_total += len(data)
        return data

    def readinto(self, b):
        got = super().readinto(b)
        Counting.read_total += got or 0
        return got


WRITERS = {"tar.gz": ["gzip", "-c", "-6"], "tar.bz2": ["bzip2", "-c", "-9"],
           "tar.xz": ["xz", "-c", "-0", "-T2", "--block-size=1MiB"]}  # fmt: skip


def _compressed(big, fmt: str):
    out = big / f"a.{fmt}"
    if not out.exists():
        require(WRITERS[fmt][0])
        with open(big / "a.tar", "rb") as src, open(out, "wb") as dst:
            subprocess.run(WRITERS[fmt], stdin=src, stdout=dst, check=True)
    return out


def _scan(path, fmt: str):
    with open(path, "rb") as fh:
        scan = ArchiveScan(fh, fmt=fmt)
        records = [r for r in scan if r.type == "file"]
    assert scan.result.status == "ok" and len(records) == MEMBERS
    return records, scan.result


@pytest.mark.parametrize("fmt", ["tar.gz", "tar.bz2", "tar.xz"])
def test_one_member_of_a_big_archive_decodes_only_near_it(big, fmt):
    if fmt != "tar.xz":
        pytest.importorskip({"tar.gz": "rapidgzip", "tar.bz2": "indexed_bzip2"}[fmt])
    path = _compressed(big, fmt)
    records, result = _scan(path, fmt)
    assert (result.seek_points is not None) == (fmt != "tar.xz")  # xz: its own block index
    last = records[-3]
    Counting.read_total = 0
    reader = SeekPointReader(lambda: Counting(path, "rb"), fmt, result.seek_points)
    data = b"".join(reader.chunks(last.data_offset, last.size))
    reader.close()
    assert blake3.blake3(data).hexdigest() == last.blake3
    with tarfile.open(big / "a.tar") as tf:
        assert data == tf.extractfile(last.path).read()
    assert Counting.read_total < os.path.getsize(path) // 4, (Counting.read_total, os.path.getsize(path))


def test_without_the_fast_decoders_a_tar_gz_reads_from_its_start(big, monkeypatch):
    path = _compressed(big, "tar.gz")
    monkeypatch.setitem(sys.modules, "rapidgzip", None)  # as if the formats extra were not installed
    assert "install the formats extra" in missing_library("tar.gz")
    records, result = _scan(path, "tar.gz")
    assert result.seek_points is None
    last = records[-1]
    reader = SeekPointReader(functools.partial(open, path, "rb"), "tar.gz", None)
    assert blake3.blake3(b"".join(reader.chunks(last.data_offset, last.size))).hexdigest() == last.blake3
    first = records[0]  # back to the start: decoded again from there
    assert blake3.blake3(b"".join(reader.chunks(first.data_offset, first.size))).hexdigest() == first.blake3
    reader.close()


def test_without_the_fast_decoders_the_index_says_what_to_install(tmp_path, vault, monkeypatch):
    monkeypatch.setitem(sys.modules, "rapidgzip", None)
    (tmp_path / "m/001_a").mkdir(parents=True)
    with tarfile.open(tmp_path / "m/001_a/a.tgz", "w:gz") as tf:
        info = tarfile.TarInfo("x.txt")
        info.size = 2
        tf.addfile(info, io.BytesIO(b"x\n"))
    r = vault("--catalog", str(tmp_path / "c.db"), "index", str(tmp_path / "m"))
    assert r.code == 0 and "install the formats extra (pip install 'cloudvault[formats]')" in r.out
    out = vault("--catalog", str(tmp_path / "c.db"), "extract", "001", "a.tgz/x.txt", "-o", "-")
    assert out.code == 0 and out.out == "x\n"
