"""libarchive's zip test files (tests/corpus/SOURCES.md) read by `vault index` as Info-ZIP unzip reads them: the
members `unzip -Z1` lists, the bytes `unzip -p` gives (bsdtar for the methods unzip 6 lacks), and a named flag
wherever vault keeps no hash of a member unzip could give bytes for; and a zip64 member past 4 GiB."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import zipfile
from pathlib import Path

import blake3
import pytest
from conftest import require
from corpus.build import CORPUS, uudecode
from zips import sparse_zip64

from cloudvault.archive.zip import ZipReader, ZipScan
from cloudvault.cli.main import main
from tests.pieces_oracle import blob_length

FILES = sorted((CORPUS / "libarchive_zip").glob("*.uu"))
# unzip 6 cannot read these, or reads them otherwise (the reason for each): only "no traceback, a flag" is asked
UNZIP_DIFFERS = {
    "test_read_format_zip_extra_padding.zip": "unzip finds no central directory; vault reads its local headers",
    "test_read_format_zip_7z_lzma.zip": "unzip 6 has no LZMA: bsdtar is the truth",
}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    require("unzip")
    root = tmp_path_factory.mktemp("zipcorpus")
    folder = root / "m/030_corpus"
    folder.mkdir(parents=True)
    for path in FILES:
        (folder / path.name[:-3]).write_bytes(uudecode(path.read_bytes()))
    db = root / "c.db"
    code = main(["--catalog", str(db), "index", "-q", str(root / "m")])
    assert code in (0, 5)
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    return folder, conn


def _members(conn, name):
    return conn.execute(
        "SELECT coalesce(m.raw_path, CAST(m.path AS BLOB)) AS raw, m.path, m.type, m.blake3, a.status, a.file_id "
        "FROM members m JOIN archives a ON a.id = m.archive_id JOIN files f ON f.id = a.file_id WHERE f.path = ?",
        (f"030_corpus/{name}",),
    ).fetchall()


def _truth(archive: Path, raw: bytes, listed: bytes | None) -> bytes | None:
    """The member's bytes as unzip -p (or, for LZMA, bsdtar) gives them; None when the tool gives none. listed:
    the name `unzip -Z1` lists at the member's place (unzip turns names of no stated charset into latin-1, and
    matches those)."""
    if archive.name in UNZIP_DIFFERS:
        out = subprocess.run([os.fsencode(require("bsdtar")), b"-xOf", bytes(archive), raw], capture_output=True)
        return out.stdout if out.returncode == 0 else None
    name = raw if raw.isascii() or listed is None else listed
    pattern = name.replace(b"\\", b"\\\\").replace(b"[", b"[[]")
    out = subprocess.run([b"unzip", b"-p", bytes(archive), pattern], capture_output=True)
    return out.stdout if out.returncode in (0, 1) else None  # 1: a warning, the data given


@pytest.mark.parametrize("uu", FILES, ids=lambda p: p.name[:-7])
def test_libarchive_zip_is_read_as_unzip_reads_it(indexed, uu):
    folder, conn = indexed
    archive = folder / uu.name[:-3]
    rows = _members(conn, archive.name)
    listed = subprocess.run(["unzip", "-Z1", str(archive)], capture_output=True)
    names = listed.stdout.splitlines() if listed.returncode == 0 else []
    if listed.returncode == 0 and archive.name not in UNZIP_DIFFERS:
        assert len(rows) == len(names)
        ascii_names = {n for n in names if n.isascii()}  # unzip turns other names of no stated charset into latin-1
        assert ascii_names <= {r["raw"] for r in rows}
    flagged = {m for (m,) in conn.execute("SELECT member FROM flags WHERE file_id = (SELECT id FROM files WHERE "
                                          "path = ?)", (f"030_corpus/{archive.name}",))}  # fmt: skip
    for i, row in enumerate(rows):  # in file order, which is the central directory's in these zips
        if row["type"] != "file":
            continue
        truth = _truth(archive, row["raw"], names[i] if len(names) == len(rows) else None)
        if row["blake3"] is not None:
            assert truth is not None and blake3.blake3(truth).hexdigest() == row["blake3"], row["path"]
        elif truth is not None:  # unzip gave bytes vault would not vouch for: said why
            assert row["path"] in flagged or row["status"] != "ok", row["path"]


def test_zip64_member_past_4_gib_is_listed_hashed_and_read_at_its_end(tmp_path):
    """A stored member of 4 GiB + 5 bytes of zeros (a sparse file: no disk), as unzip -l and zipfile list it."""
    require("unzip")
    size = (4 << 30) + 5
    archive = sparse_zip64(tmp_path / "huge.zip", size)
    listed = subprocess.run(["unzip", "-l", str(archive)], capture_output=True, text=True, check=True).stdout
    assert f"{size}" in listed and "huge.bin" in listed
    with zipfile.ZipFile(archive) as zf:
        assert zf.getinfo("huge.bin").file_size == size
    with open(archive, "rb") as fh:
        scan = ZipScan(fh)
        records, result = list(scan), scan.result
    assert result.status == "ok" and not result.flags, result.flags
    (rec,) = records
    zeros, block = blake3.blake3(max_threads=blake3.blake3.AUTO), bytes(1 << 24)
    for at in range(0, size, len(block)):
        zeros.update(block[: size - at])
    assert rec.size == size and rec.blake3 == zeros.hexdigest() and len(rec.pieces) == blob_length(4097)
    reader = ZipReader(open(archive, "rb"), result.frames)  # noqa: SIM115 (closed below)
    try:  # the last bytes, sought to: a stored member is entered where they are
        assert b"".join(reader.chunks(rec.data_offset + size - 7, 7)) == bytes(7)
        assert reader.bytes_decompressed == 7
    finally:
        reader.close()
