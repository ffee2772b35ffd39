"""The one-pass piece hashes (cloudvault/_b3tree.c) against the `blake3` package and against the numpy code written
apart from it (cloudvault/b3subtree.py): the whole hash is BLAKE3 for every length class however the bytes are cut,
on the AVX-512, AVX2 and portable paths; each piece's value is the BLAKE3 tree's own node (the piece values merged
give `blake3`'s hash of the whole); a piece changed anywhere is refused, by the extension and without it; BLOBs of
both kinds are read and checked."""

from __future__ import annotations

import os
import random

import blake3
import numpy as np
import pytest

from cloudvault import b3subtree, pieces
from cloudvault.errors import PieceMismatch
from cloudvault.io.members import PieceCheck, PieceGate
from cloudvault.pieces import PIECE, PIECE_DIGEST, TREE, TwoPassHasher, read_pieces
from tests.pieces_oracle import run_with_simd

_b3tree = pieces._b3tree or (pytest.skip("cloudvault._b3tree not built", allow_module_level=True)
                            if os.environ.get("CI") != "true" else None)  # fmt: skip
M = PIECE
LENGTHS = [0, 1, 63, 64, 65, 1023, 1024, 1025, 2048, 5 * 1024 + 3, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1,
           17 * 1024, M - 1, M, M + 1, M + 1024, M + 1025, M + 7 * 1024 + 9, 2 * M, 2 * M + 5, 3 * M + 777,
           5 * M]  # fmt: skip
CUTS = [None, 1000, 1024, 4096, 65537, M, 3 * M]
DATA = random.Random(1).randbytes(5 * M)


def fed(hasher, data: bytes, cut: int | None):
    for at in range(0, len(data), cut or max(len(data), 1)):
        hasher.update(data[at : at + (cut or len(data))])
    return hasher


def test_the_extension_is_built_and_used_where_ci_runs():
    """CI builds the extension (gcc is installed there); on a CPU with AVX-512 or AVX2 the index uses it."""
    assert _b3tree is not None, "cloudvault._b3tree was not built"
    with open("/proc/cpuinfo") as fh:
        flags = fh.read().replace("\n", " ")
    widest = "avx512" if " avx512f " in flags else "avx2" if " avx2 " in flags else "portable"
    assert widest == _b3tree.SIMD
    assert (widest != "portable") == pieces.ONE_PASS


@pytest.mark.parametrize("length", LENGTHS)
def test_the_whole_hash_is_blake3_and_the_pieces_are_the_trees_nodes_however_cut(length):
    data = DATA[:length]
    want = blake3.blake3(data).digest()
    for cut in CUTS:
        root, values = fed(_b3tree.TreeHasher(), data, cut).finish()
        assert root == want, (length, cut)
        assert len(values) == (0 if length <= M else 32 * ((length + M - 1) // M))
    if length > M:  # the values merged are blake3's root: they are the tree's own nodes, not some other hash
        assert values == b"".join(b3subtree.values_of(data, M))
        stacked = np.stack([np.frombuffer(values[at : at + 32], "<u4") for at in range(0, len(values), 32)], axis=1)
        assert b3subtree.merge(stacked, root=True) == want
        assert _b3tree.root_of(values) == want  # what a file hashed a piece per thread takes


@pytest.mark.parametrize("narrower", ["avx2", "portable"])
def test_a_narrower_path_gives_the_same_hashes_as_the_widest(narrower):
    code = ("import os, blake3; from cloudvault import _b3tree\n"
            "assert _b3tree.SIMD == os.environ['CLOUDVAULT_B3TREE_SIMD'], _b3tree.SIMD\n"
            "d = bytes(range(256)) * 12289\n"
            "for n in (0, 1024, 1025, 17 * 1024, 1 << 20, (1 << 20) + 1, len(d)):\n"
            "    h = _b3tree.TreeHasher(); h.update(d[:n]); root, values = h.finish()\n"
            "    assert root == blake3.blake3(d[:n]).digest(), n\n"
            "    print(n, values.hex())\n")  # fmt: skip
    with open("/proc/cpuinfo") as fh:
        if narrower == "avx2" and " avx2 " not in fh.read().replace("\n", " "):
            pytest.skip("this CPU has no AVX2")
    d = bytes(range(256)) * 12289
    for line in run_with_simd(code, narrower).splitlines():
        n, _, values = line.partition(" ")
        h = _b3tree.TreeHasher()
        h.update(d[: int(n)])
        assert h.finish()[1].hex() == values


def test_a_subtree_is_its_pieces_value_in_the_extension_and_in_numpy():
    data = DATA[: 3 * M + 777]
    values = _b3tree.TreeHasher()
    values.update(data)
    values = values.finish()[1]
    for index, at in enumerate(range(0, len(data), M)):
        piece = data[at : at + M]
        native = fed(_b3tree.Subtree(index), piece, 300_000).digest()
        assert native == values[32 * index : 32 * index + 32] == b3subtree.Subtree(index).fed(piece).digest()
        assert fed(_b3tree.Subtree(index), piece, None).digest(PIECE_DIGEST) == native[:PIECE_DIGEST]


def test_root_of_wants_the_values_of_two_pieces_or_more():
    for bad in (b"", bytes(32), bytes(65)):
        with pytest.raises(ValueError):
            _b3tree.root_of(bad)


def test_a_subtree_refuses_more_than_a_piece_and_an_empty_digest():
    s = _b3tree.Subtree(0)
    with pytest.raises(ValueError):
        s.update(b"\0" * (M + 1))
    with pytest.raises(ValueError):
        s.digest()


def one_pass_blob(data: bytes) -> bytes:
    h = _b3tree.TreeHasher()
    h.update(data)
    values = h.finish()[1]
    return TREE + b"".join(values[at : at + PIECE_DIGEST] for at in range(0, len(values), 32))


def gate_all(check: PieceCheck, data: bytes) -> tuple[bytes, Exception | None]:
    gate, out = PieceGate(check), []
    try:
        for at in range(0, len(data), 700_000):
            out.extend(gate.feed(data[at : at + 700_000]))
        gate.end()
    except PieceMismatch as exc:
        return b"".join(out), exc
    return b"".join(out), None


@pytest.mark.parametrize("native", [True, False], ids=["extension", "numpy"])
def test_a_changed_byte_is_refused_at_its_piece_with_the_extension_and_without(native, monkeypatch):
    data = DATA[: 3 * M + 100]
    whole = blake3.blake3(data).hexdigest()
    blob = one_pass_blob(data)
    if not native:
        monkeypatch.setattr(pieces, "_b3tree", None)
    assert gate_all(PieceCheck("x", len(data), whole, blob), data) == (data, None)
    changed = bytearray(data)
    changed[2 * M + 5] ^= 1
    out, exc = gate_all(PieceCheck("x", len(data), whole, blob), bytes(changed))
    assert out == data[: 2 * M] and isinstance(exc, PieceMismatch) and exc.fields["offset"] == 2 * M


def test_a_two_pass_blob_of_an_older_catalog_is_read_and_checked_as_before():
    data = DATA[: 2 * M + 9]
    old = TwoPassHasher()
    old.update(data)
    blob = old.pieces()
    assert blob[:1] != TREE or len(blob) % PIECE_DIGEST == 0
    assert read_pieces(blob, len(data)) == (blob, False)
    assert read_pieces(one_pass_blob(data), len(data))[1] is True
    whole = blake3.blake3(data).hexdigest()
    assert gate_all(PieceCheck("x", len(data), whole, blob), data) == (data, None)
    changed = data[:M] + b"!" + data[M + 1 :]
    out, exc = gate_all(PieceCheck("x", len(data), whole, blob), changed)
    assert out == data[:M] and exc.fields["offset"] == M
    assert read_pieces(blob[:-1], len(data)) is None  # a BLOB that does not fit the size is no piece hashes


@pytest.mark.parametrize("length", [M - 1, M, M + 1, 2 * M + 5, 3 * M + 777])
def test_the_first_pieces_parts_are_the_trees_own_nodes_16_of_them_merging_to_its_value(length):
    """TreeHasher.first_parts: the 64 KiB subtrees' values inside the first piece, as numpy computes them apart from
    the C code; merged, they are the first piece's value, and the pieces' values merged are blake3's hash."""
    data = DATA[:length]
    h = fed(_b3tree.TreeHasher(), data, 65537)
    root, values = h.finish()
    parts = h.first_parts()
    if length <= M:
        assert parts == b""
        return
    assert parts == b"".join(b3subtree.values_of(data[:M], pieces.PART))
    for j in range(pieces.PARTS):
        piece = data[j * pieces.PART : (j + 1) * pieces.PART]
        assert fed(_b3tree.Subtree(j, pieces.PART_CHUNKS), piece, 1000).digest() == parts[32 * j : 32 * j + 32]
    stacked = np.stack([np.frombuffer(parts[at : at + 32], "<u4") for at in range(0, len(parts), 32)], axis=1)
    assert b3subtree.merge(stacked) == values[:32]
    assert root == blake3.blake3(data).digest()


def numpy_value(index: int, data: bytes, chunks: int = 1024) -> bytes:
    return b3subtree.Subtree(index, chunks).fed(data).digest()


@pytest.mark.parametrize("index", [0, 4])
def test_a_whole_piece_s_subtree_gives_its_parts_from_the_same_hashing(index):
    """Subtree.value_and_parts: a whole piece's value and its 16 parts' values (numpy's, apart from the C code), the
    parts kept on the way to the value as TreeHasher.first_parts keeps them; a piece not whole has none."""
    data, part = DATA[index * M : (index + 1) * M], pieces.PART
    value, parts = fed(_b3tree.Subtree(index), data, 65537).value_and_parts()
    assert value == numpy_value(index, data)
    assert parts == b"".join(numpy_value(16 * index + j, data[j * part : (j + 1) * part], pieces.PART_CHUNKS)
                             for j in range(pieces.PARTS))  # fmt: skip
    if index == 0:
        h = fed(_b3tree.TreeHasher(), DATA[: M + 1], None)
        assert (h.finish()[1][:32], h.first_parts()) == (value, parts)
    for short in (b"", data[:-1]):
        with pytest.raises(ValueError):
            fed(_b3tree.Subtree(index), short, None).value_and_parts()
    with pytest.raises(ValueError):
        fed(_b3tree.Subtree(0, pieces.PART_CHUNKS), data[:part], None).value_and_parts()


def test_a_subtree_of_a_part_refuses_more_than_its_64_kib_and_a_size_not_a_power_of_two():
    s = _b3tree.Subtree(3, pieces.PART_CHUNKS)
    with pytest.raises(ValueError):
        s.update(b"\0" * (pieces.PART + 1))
    for bad in (0, 3, 2048):
        with pytest.raises(ValueError):
            _b3tree.Subtree(0, bad)


@pytest.mark.parametrize("native", [True, False], ids=["extension", "numpy"])
def test_a_first_parts_blob_is_checked_by_piece_and_by_part_with_the_extension_and_without(native, monkeypatch):
    """The index's one-pass BLOB now leads with the first piece's parts: a stream checks the pieces as before, a read
    at an offset checks the part it touches; a changed byte is refused at its part (first 64 KiB, or the rest of
    the first piece) or at its piece (after the first), and never handed out."""
    data = DATA[: 2 * M + 100]
    whole = blake3.blake3(data).hexdigest()
    hasher = pieces.PieceHasher()
    hasher.update(data)
    blob = hasher.pieces()
    assert blob[:1] == pieces.FIRST_PARTS and len(blob) == 1 + 16 * pieces.PARTS + 16 * 3
    assert read_pieces(blob, len(data)) == (blob[1 + 16 * pieces.PARTS :], True)
    if not native:
        monkeypatch.setattr(pieces, "_b3tree", None)
    assert gate_all(PieceCheck("x", len(data), whole, blob), data) == (data, None)
    check = PieceCheck("x", len(data), whole, blob)
    assert check.spans(0, 1) == [(0, pieces.PART)] and check.spans(M - 1, M + 1) == [(M - pieces.PART, pieces.PART),
                                                                                      (M, M)]  # fmt: skip
    for at, bad_start, bad_size in ((100, 0, pieces.PART), (M // 2 + 3, M // 2, pieces.PART), (M + 5, M, M)):
        changed = bytearray(data)
        changed[at] ^= 1
        out, exc = gate_all(PieceCheck("x", len(data), whole, blob), bytes(changed))
        assert out == data[: at // M * M] and exc.fields["offset"] == at // M * M  # streams: by piece, as before
        for start, size in check.spans(0, len(data)):
            h = check.span_hasher(start, size)
            h.update(bytes(changed[start : start + size]))
            if start == bad_start:
                with pytest.raises(PieceMismatch) as caught:
                    check.verify_span(start, size, h)
                assert (caught.value.fields["offset"], caught.value.fields["size"]) == (bad_start, bad_size)
            else:
                check.verify_span(start, size, h)
