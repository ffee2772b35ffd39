"""archive/formats.py: an archive's format from its first bytes (made by the formats' own tools) and its name."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile

import pytest
import zstandard

from cloudvault.archive.formats import HEAD, archive_format, might_be_archive


def _tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        info = tarfile.TarInfo("a.txt")
        info.size = 5
        tf.addfile(info, io.BytesIO(b"hello"))
    return buf.getvalue()


TAR = _tar()
COMPRESS = {
    "tar.gz": gzip.compress,
    "tar.bz2": bz2.compress,
    "tar.xz": lzma.compress,
    "tar.zst": zstandard.ZstdCompressor().compress,
    "tar": bytes,
}


@pytest.mark.parametrize("fmt", sorted(COMPRESS))
@pytest.mark.parametrize("name", ["x.tar.zst", "x.tgz", "x.tar.bz2", "x.txz", "x.tar", "x.tzst", "x.tar.zstd"])
def test_the_bytes_decide_whatever_the_name(fmt, name):
    assert archive_format(COMPRESS[fmt](TAR)[:HEAD], name) == fmt


@pytest.mark.parametrize("fmt", sorted(COMPRESS))
def test_a_compressed_tar_under_a_plain_compressed_name_is_an_archive(fmt):
    name = {"tar.gz": "x.gz", "tar.bz2": "x.bz2", "tar.xz": "x.xz", "tar.zst": "x.zst", "tar": "x.tar"}[fmt]
    assert archive_format(COMPRESS[fmt](TAR), name) == fmt


@pytest.mark.parametrize("name", ["notes.json.gz", "dump.bz2", "log.xz", "weights.zst"])
def test_a_compressed_file_that_is_no_tar_is_a_plain_file(name):
    compress = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "zst": zstandard.compress}
    data = compress[name.rsplit(".", 1)[1]](b'{"a": 1}\n' * 200)
    assert archive_format(data, name) is None


def test_bytes_that_say_nothing_take_the_name():
    assert archive_format(b"garbage" * 100, "x.tar.gz") == "tar.gz"
    assert archive_format(b"", "x.tar.zst") == "tar.zst"
    assert archive_format(b"garbage" * 100, "x.bin") is None


def test_an_old_v7_header_is_known_by_its_checksum():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        tf.addfile(tarfile.TarInfo("v7"), io.BytesIO(b""))
    block = bytearray(buf.getvalue()[:512])
    block[257:265] = bytes(8)  # no magic, as a v7 header
    block[148:156] = b" " * 8
    block[148:155] = b"%06o\x00" % (sum(block))
    assert archive_format(bytes(block), "v7.dat") == "tar"


@pytest.mark.parametrize(
    ("head", "name", "fmt"),
    [
        (b"Rar!\x1a\x07\x00\xcf\x90\x73\x00\x00\x0d\x00", "a.rar", "rar"),
        (b"Rar!\x1a\x07\x00\xcf\x90\x73\x01\x00\x0d\x00", "a.rar", "multi-volume"),  # MHD_VOLUME
        (b"Rar!\x1a\x07\x01\x00" + bytes(8), "a.rar", "rar"),
        (b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(24), "a.7z", "7z"),
        (b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(24), "a.7z.001", "multi-volume"),
        (b"anything", "a.part1.rar", "multi-volume"),
    ],
)
def test_formats_vault_does_not_open_are_named(head, name, fmt):
    assert archive_format(head, name) == fmt


@pytest.mark.parametrize(
    ("name", "worth"),
    [("a.tar.zst", True), ("a.TGZ", True), ("a.tar", True), ("a.gz", True), ("a.rar", True), ("a.7z", True),
     ("a.txt", False), ("a.tar.zst.list", False), ("a.py", False)],
)  # fmt: skip
def test_which_names_are_worth_a_look(name, worth):
    assert might_be_archive(name) is worth


def test_a_zst_bomb_is_looked_at_without_decoding_it_all(tmp_path):
    """64 KiB of zstd can hold gigabytes of zeros: the look at a `.zst`'s first bytes decodes 1 KiB of them."""
    import subprocess
    import sys

    cobj, zeros = zstandard.ZstdCompressor(level=3).compressobj(), bytes(1 << 20)
    blob = b"".join(cobj.compress(zeros) for _ in range(1024)) + cobj.flush()  # 1 GiB of zeros, never held whole
    (tmp_path / "bomb.zst").write_bytes(blob)
    # VmHWM, this process's own peak: ru_maxrss keeps the peak of the process forked before the exec (a pytest-xdist
    # worker's 600 MB)
    code = ("import re, sys; from cloudvault.archive.formats import archive_format; "
            "print(archive_format(open(sys.argv[1], 'rb').read(65536), 'bomb.zst'), "
            "int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1]) // 1024)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "bomb.zst")], capture_output=True, text=True)
    fmt, peak_mib = out.stdout.split()
    assert fmt == "None" and int(peak_mib) < 200, out
