"""Reading on after damage: a tar walk that starts inside an archive finds the next member's header, and the zstd
frame after a damaged one is found by its block headers or, where they are damaged too, by the next frame magic
(issue 41: salvage at the first index; tests/faults/test_salvage.py runs the whole journey)."""

from __future__ import annotations

import io
import tarfile

import pytest
import zstandard

from cloudvault.archive.tar import iter_members
from cloudvault.archive.zstdframes import ZSTD_MAGIC, damaged_frame_after


class Bytes:
    """A tar stream over bytes that says its position as the whole archive's (it starts at offset)."""

    def __init__(self, data: bytes, offset: int) -> None:
        self._fh, self.pos = io.BytesIO(data[offset:]), offset

    def read(self, n: int) -> bytes:
        got = self._fh.read(n)
        self.pos += len(got)
        return got

    read_some = read


def tar_bytes(sizes: list[int]) -> tuple[bytes, list[tarfile.TarInfo]]:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i, size in enumerate(sizes):
            info = tarfile.TarInfo(f"dir/member{i:02d}.bin")
            info.size = size
            tar.addfile(info, io.BytesIO(bytes([i]) * 700 + bytes(size - 700) if size > 700 else bytes(size)))
    data = out.getvalue()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return data, tar.getmembers()


@pytest.mark.parametrize("start", [0, 1, 511, 512, 5000, 20_000, 70_001])
def test_a_walk_resumed_anywhere_reads_exactly_the_members_whose_header_comes_after(start):
    data, members = tar_bytes([3000, 10_000, 0, 40_000, 700, 1, 25_000])
    walk = iter_members(Bytes(data, start), resume=True)
    got = [(h.name.decode(), h.header_offset, h.data_offset, h.size) for h, _ in walk]
    want = [(m.name, m.offset, m.offset_data, m.size) for m in members if m.offset >= start]
    assert got == want


def frames(parts: list[bytes], content_size: bool) -> tuple[bytes, list[int]]:
    cctx = zstandard.ZstdCompressor(write_content_size=content_size, write_checksum=True)
    compressed = [cctx.compress(part) for part in parts]
    return b"".join(compressed), [sum(map(len, compressed[:i])) for i in range(len(parts))]


@pytest.mark.parametrize("content_size", [True, False])
@pytest.mark.parametrize("damage", ["content", "block_header"])
def test_the_frame_after_a_damaged_one_is_found_and_the_damaged_one_s_size_is_known(content_size, damage):
    parts = [bytes(range(256)) * 800 + bytes(range(200)) * k for k in (10, 300, 20)]
    data, starts = frames(parts, content_size)
    bad = bytearray(data)
    header = 6 + (8 if content_size else 0)  # magic, descriptor, window, content size: the first block header
    at = starts[1] + (header if damage == "block_header" else (starts[2] - starts[1]) // 2)
    bad[at + (2 if damage == "block_header" else 0)] ^= 0x40 if damage == "block_header" else 0x01
    found = damaged_frame_after(io.BytesIO(bytes(bad)), starts[1], len(bad))
    if found is None:  # only where nothing says its size: no content size, and it does not decode to its end
        assert not content_size
        return
    assert found.start == starts[1] and found.end == starts[2]
    assert int.from_bytes(bad[found.end : found.end + 4], "little") == ZSTD_MAGIC
    if content_size:
        assert found.raw_size == len(parts[1])
    else:  # what it decoded to, up to a whole tar block: the walk after it looks for headers on block boundaries
        assert found.raw_size % 512 == 0
