"""What the index must record as an object's piece hashes, computed apart from cloudvault.pieces: two passes (the
BLAKE3 of each MiB, by the `blake3` package) or, where the one-pass extension is in use, each MiB's BLAKE3 chaining
value by cloudvault.b3subtree (numpy, written apart from the C code; tests/unit/test_b3tree.py checks it against
`blake3`'s own hash of the whole), led by the values of the first piece's 64 KiB parts (a FIRST_PARTS BLOB).
And the native extensions' narrower SIMD paths, run in a child Python that asked for one (CLOUDVAULT_B3TREE_SIMD is
read once, at import)."""

from __future__ import annotations

import os
import subprocess
import sys

import blake3

from cloudvault import b3subtree
from cloudvault.pieces import FIRST_PARTS, ONE_PASS, PART, PARTS, PIECE, PIECE_DIGEST


def expected_pieces(data: bytes) -> bytes | None:
    if len(data) <= PIECE:
        return None
    if ONE_PASS:
        values = b3subtree.values_of(data[:PIECE], PART) + b3subtree.values_of(data, PIECE)
        return FIRST_PARTS + b"".join(value[:PIECE_DIGEST] for value in values)
    return b"".join(blake3.blake3(data[i : i + PIECE]).digest(PIECE_DIGEST) for i in range(0, len(data), PIECE))


def blob_length(pieces: int) -> int:
    """The length of the BLOB the index records for an object of that many pieces."""
    return pieces * PIECE_DIGEST + (len(FIRST_PARTS) + PARTS * PIECE_DIGEST if ONE_PASS else 0)


def run_with_simd(code: str, simd: str) -> str:
    """What `python -c code` prints where the extensions were imported with CLOUDVAULT_B3TREE_SIMD=simd ("avx2" or
    "portable"); a failure in the child fails the test with its stderr."""
    env = {**os.environ, "CLOUDVAULT_B3TREE_SIMD": simd}
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    return child.stdout
