"""A file's piece hashes memory-mapped and hashed a piece a thread (hashing.hash_file_pieces) against the stream's
one pass (the native TreeHasher) and the `blake3` package / numpy oracle: the same BLAKE3 and the same BLOB, byte for
byte, the first piece's parts included; and each byte of the file hashed once, the parts taken from the first
piece's own hashing rather than its MiB hashed again."""

from __future__ import annotations

import random
import types

import blake3
import pytest

from cloudvault import hashing, pieces
from cloudvault.pieces import FIRST_PARTS, PIECE, piece_count
from tests.pieces_oracle import expected_pieces

SIZES = [PIECE + 1, 16 * PIECE, 16 * PIECE + 5]


def streamed(data: bytes) -> tuple[str, bytes | None]:
    h = pieces.PieceHasher()
    h.update(data)
    return h.hexdigest(), h.pieces()


@pytest.mark.parametrize("size", SIZES)
def test_a_mapped_file_s_blob_is_the_stream_s_byte_for_byte(tmp_path, monkeypatch, size):
    data = random.Random(size).randbytes(size)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    monkeypatch.setattr(hashing, "MMAP_THRESHOLD", PIECE)  # a file of 1 MiB + 1 mapped too
    mapped = hashing.hash_file_pieces(path)
    assert mapped == streamed(data) == (blake3.blake3(data).hexdigest(), expected_pieces(data))


def counting_b3tree(made: list, fed: list) -> types.SimpleNamespace:
    """cloudvault._b3tree with each Subtree made and each byte fed to one counted."""
    real = pieces._b3tree

    class Subtree:
        def __init__(self, *args) -> None:
            made.append(args)
            self._h = real.Subtree(*args)

        def update(self, data) -> None:
            fed.append(len(data))
            self._h.update(data)

        def __getattr__(self, name):
            return getattr(self._h, name)

    return types.SimpleNamespace(TreeHasher=real.TreeHasher, Subtree=Subtree, root_of=real.root_of, SIMD=real.SIMD)


@pytest.mark.skipif(not pieces.ONE_PASS, reason="the mapped path hashes pieces by Subtree only where ONE_PASS")
def test_a_mapped_file_s_bytes_are_hashed_once_the_first_piece_s_parts_taken_from_its_own_hashing(
    tmp_path, monkeypatch
):
    size = 16 * PIECE + 5
    data = random.Random(2).randbytes(size)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    made, fed = [], []
    monkeypatch.setattr(pieces, "_b3tree", counting_b3tree(made, fed))
    whole, blob = hashing.hash_file_pieces(path)
    assert (whole, blob[:1]) == (blake3.blake3(data).hexdigest(), FIRST_PARTS)
    assert sum(fed) == size  # not the first MiB again for its 16 parts
    assert len(made) == piece_count(size)  # a Subtree a piece, none a part
