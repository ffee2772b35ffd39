"""The scan records each member's piece hashes (and the archive file's), on one core or with members hashed apart,
equal to the BLAKE3 of each 1 MiB of what tarfile extracts."""

from __future__ import annotations

import io
import tarfile
from functools import partial

import blake3
import pytest
import zstandard

from cloudvault.archive.scan import ArchiveScan
from cloudvault.pieces import PIECE
from tests.pieces_oracle import expected_pieces

SIZES = {"empty": 0, "small": 100, "one_piece": PIECE, "just_over": PIECE + 1, "several": 5 * PIECE + 3}


def archive_bytes() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, size in SIZES.items():
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(blake3.blake3(name.encode()).digest(length=size) if size else b""))
        link = tarfile.TarInfo("link_to_several")
        link.type, link.linkname = tarfile.LNKTYPE, "several"
        tar.addfile(link)
    raw = buf.getvalue()
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    return b"".join(cctx.compress(raw[i : i + (2 << 20)]) for i in range(0, len(raw), 2 << 20))  # several frames


@pytest.mark.parametrize("decoders", [1, 4])  # 4: members of 64 KiB and more hashed by threads of their own
def test_each_member_s_pieces_are_the_blake3_of_each_mib_tarfile_extracts(decoders):
    blob = archive_bytes()
    scan = ArchiveScan(io.BytesIO(blob), opener=partial(io.BytesIO, blob), decoders=decoders)
    records = {r.path: r for r in scan}
    raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(blob), read_across_frames=True).read()
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for name in SIZES:
            data = tar.extractfile(name).read()
            assert records[name].blake3 == blake3.blake3(data).hexdigest()
            assert records[name].pieces == expected_pieces(data), name
        assert records["link_to_several"].pieces == expected_pieces(tar.extractfile("several").read())
    assert scan.result.pieces == expected_pieces(blob)  # the archive file's own bytes
