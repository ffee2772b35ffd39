"""BLAKE3 chaining values of pieces in numpy: what the native cloudvault._b3tree.Subtree computes, for checking a
catalog's one-pass piece hashes where the extension could not be built (~50 MB/s against its ~6 GB/s).

Written from the BLAKE3 specification, apart from the C code, so each checks the other (tests/unit/test_b3tree.py):
a piece is the subtree of the chunks at its offset (chunk counters from index * 1024), its chunks compressed side by
side as numpy lanes, then merged pairwise from the left, an odd last node carried up (the left-balanced tree).
"""

from __future__ import annotations

import numpy as np

CHUNK, BLOCK, PIECE_CHUNKS = 1024, 64, 1024
CHUNK_START, CHUNK_END, PARENT, ROOT = 1, 2, 4, 8
IV = np.array([0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19],
              dtype=np.uint32)  # fmt: skip
PERMUTATION = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)


def _schedule() -> list[tuple[int, ...]]:
    rounds = [tuple(range(16))]
    for _ in range(6):
        rounds.append(tuple(rounds[-1][i] for i in PERMUTATION))
    return rounds


SCHEDULE = _schedule()
MIXES = ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
         (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14))  # fmt: skip


def _rotr(x: np.ndarray, c: int) -> np.ndarray:
    return (x >> np.uint32(c)) | (x << np.uint32(32 - c))


def compress(cv: np.ndarray, m: np.ndarray, counter: np.ndarray, block_len, flags) -> np.ndarray:
    """The next chaining values of n lanes: cv (8, n), m (16, n) message words, counter (n,) uint64."""
    n = cv.shape[1]
    v = [cv[i].copy() for i in range(8)] + [np.full(n, IV[i], np.uint32) for i in range(4)]
    v += [(counter & 0xFFFFFFFF).astype(np.uint32), (counter >> np.uint64(32)).astype(np.uint32),
          np.broadcast_to(np.asarray(block_len, np.uint32), (n,)).copy(),
          np.broadcast_to(np.asarray(flags, np.uint32), (n,)).copy()]  # fmt: skip
    for s in SCHEDULE:
        for g, (a, b, c, d) in enumerate(MIXES):
            v[a] = v[a] + v[b] + m[s[2 * g]]
            v[d] = _rotr(v[d] ^ v[a], 16)
            v[c] = v[c] + v[d]
            v[b] = _rotr(v[b] ^ v[c], 12)
            v[a] = v[a] + v[b] + m[s[2 * g + 1]]
            v[d] = _rotr(v[d] ^ v[a], 8)
            v[c] = v[c] + v[d]
            v[b] = _rotr(v[b] ^ v[c], 7)
    return np.stack([v[i] ^ v[i + 8] for i in range(8)])


def chunk_values(data: bytes, first_chunk: int) -> np.ndarray:
    """(8, n) chaining values of the n chunks of data (at least one byte), none of them the root."""
    n = (len(data) + CHUNK - 1) // CHUNK
    words = np.frombuffer(bytes(data).ljust(n * CHUNK, b"\0"), "<u4").reshape(n, 16, 16)
    last_len = len(data) - (n - 1) * CHUNK
    blocks = np.full(n, 16)
    blocks[-1] = (last_len + BLOCK - 1) // BLOCK
    counter = np.arange(first_chunk, first_chunk + n, dtype=np.uint64)
    cv = np.repeat(IV[:, None], n, axis=1)
    for b in range(16):
        active = b < blocks
        if not active.any():
            break
        block_len = np.full(n, BLOCK, np.uint32)
        if blocks[-1] - 1 == b:
            block_len[-1] = last_len - b * BLOCK
        flags = np.where(b == blocks - 1, CHUNK_END, 0) | (CHUNK_START if b == 0 else 0)
        new = compress(cv, words[:, b, :].T.copy(), counter, block_len, flags.astype(np.uint32))
        cv = np.where(active, new, cv)
    return cv


def merge(cvs: np.ndarray, root: bool = False) -> bytes:
    """The left-balanced tree over (8, n) chaining values: pairs from the left, an odd last one carried up."""
    while cvs.shape[1] > 1:
        pairs = cvs.shape[1] // 2
        top = root and cvs.shape[1] == 2
        m = np.concatenate([cvs[:, 0 : 2 * pairs : 2], cvs[:, 1 : 2 * pairs : 2]])
        parents = compress(np.repeat(IV[:, None], pairs, axis=1), m, np.zeros(pairs, np.uint64), BLOCK,
                           PARENT | (ROOT if top else 0))  # fmt: skip
        cvs = np.concatenate([parents, cvs[:, 2 * pairs :]], axis=1)
    return cvs[:, 0].astype("<u4").tobytes()


def values_of(data: bytes, piece: int = 1 << 20) -> list[bytes]:
    """The 32-byte chaining value of each piece (or part: piece 64 KiB) of an object larger than one (for tests and
    checks)."""
    chunks = piece // CHUNK
    return [Subtree(i, chunks).fed(data[at : at + piece]).digest() for i, at in enumerate(range(0, len(data), piece))]


class Subtree:
    """Subtree(index, chunks=PIECE_CHUNKS): update(bytes) ...; digest(length=32): the chaining value of subtree
    `index` of `chunks` chunks (a piece, or with 64 one of the first piece's parts; never the root)."""

    def __init__(self, index: int, chunks: int = PIECE_CHUNKS) -> None:
        self._first, self._room = index * chunks, chunks * CHUNK
        self._data = bytearray()

    def update(self, data) -> None:
        if len(self._data) + len(data) > self._room:
            raise ValueError(f"a piece holds at most {self._room} bytes")
        self._data += data

    def fed(self, data) -> Subtree:
        self.update(data)
        return self

    def digest(self, length: int = 32) -> bytes:
        if not self._data:
            raise ValueError("a piece holds at least one byte")
        return merge(chunk_values(self._data, self._first))[:length]
