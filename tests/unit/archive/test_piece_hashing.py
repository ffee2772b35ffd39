"""Two-pass piece hashes (where the one-pass extension is not in use) made on two cores (the whole BLAKE3 here, the
pieces' on a PieceThread, for large updates) are the ones made on one, whatever the updates' sizes: compared with
blake3 over the bytes and over each MiB."""

from __future__ import annotations

import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudvault.hashing import PieceThread
from cloudvault.pieces import BESIDE_MIN, PIECE, PIECE_DIGEST, TwoPassHasher


def expected(data: bytes) -> tuple[str, bytes | None]:
    pieces = b"".join(blake3.blake3(data[i : i + PIECE]).digest(PIECE_DIGEST) for i in range(0, len(data), PIECE))
    return blake3.blake3(data).hexdigest(), pieces if len(data) > PIECE else None


CUTS = st.lists(st.sampled_from([1, 1000, BESIDE_MIN - 1, BESIDE_MIN, PIECE - 7, PIECE, PIECE + 513, 3 * PIECE]),
                max_size=6)  # fmt: skip


@settings(max_examples=15, deadline=None)
@given(CUTS, st.integers(0, 255))
def test_pieces_hashed_beside_the_whole_are_the_pieces_hashed_alone(cuts, seed):
    data = bytes((seed + i * 7) % 251 for i in range(sum(cuts)))
    beside = PieceThread()
    try:
        two, one, at = TwoPassHasher(beside=beside), TwoPassHasher(), 0
        for cut in cuts:
            two.update(memoryview(data)[at : at + cut])
            one.update(data[at : at + cut])
            at += cut
    finally:
        beside.close()
    assert (two.hexdigest(), two.pieces()) == (one.hexdigest(), one.pieces()) == expected(data)


def test_an_error_in_the_piece_thread_reaches_the_caller_and_the_thread_goes_on():
    beside = PieceThread()
    try:
        h = TwoPassHasher(beside=beside)
        try:
            h.update("not bytes" * BESIDE_MIN)  # memoryview() of a str fails in the piece thread
        except TypeError:
            pass
        else:
            raise AssertionError("the piece thread's error was lost")
        ok = TwoPassHasher(beside=beside)
        ok.update(bytes(2 * PIECE))
        assert (ok.hexdigest(), ok.pieces()) == expected(bytes(2 * PIECE))
    finally:
        beside.close()
