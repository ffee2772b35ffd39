"""Many members' BLAKE3 in one native call (cloudvault/_plainruns.c, one lane per member) against the `blake3` package:
every length class, members in any order and overlap of a buffer, on the AVX-512, AVX2 and portable paths; members
too large for it are left to the caller (None); the pure-Python fallback gives the same answers."""

from __future__ import annotations

import ctypes
import os
import random

import blake3
import pytest

from cloudvault import hashing, pieces
from tests.pieces_oracle import run_with_simd

_plainruns = hashing._plainruns or (pytest.skip("cloudvault._plainruns not built", allow_module_level=True)
                              if os.environ.get("CI") != "true" else None)  # fmt: skip
LENGTHS = [0, 1, 63, 64, 65, 127, 128, 1023, 1024, 1025, 2047, 2048, 2049, 3000, 4096, 5 * 1024 + 3,
           16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 17 * 1024, 33 * 1024 + 5, 65535, 65536, 65537]  # fmt: skip
DATA = random.Random(7).randbytes(1 << 20)
LIMIT = 1 << 17


def want(data: bytes, starts: list[int], sizes: list[int], shift: int, limit: int) -> list[str | None]:
    return [blake3.blake3(data[s + shift : s + shift + n]).hexdigest() if n < limit else None
            for s, n in zip(starts, sizes, strict=True)]  # fmt: skip


def test_every_length_class_alone_and_all_together():
    for n in LENGTHS:
        assert _plainruns.hex_digests(DATA, [5], [n], 0, LIMIT) == want(DATA, [5], [n], 0, LIMIT), n
    rng = random.Random(3)
    sizes = [rng.choice(LENGTHS) for _ in range(500)] + LENGTHS
    starts = [rng.randrange(len(DATA) - n) for n in sizes]
    assert _plainruns.hex_digests(DATA, starts, sizes, 0, LIMIT) == want(DATA, starts, sizes, 0, LIMIT)


def test_many_small_members_of_random_sizes_with_a_shift_and_a_limit():
    """As a plain run asks: header offsets in the stream, data a block after, the piece's base subtracted; members
    at or above the limit not hashed."""
    rng = random.Random(5)
    sizes = [rng.randint(0, 5000) for _ in range(3000)] + [70_000, 0, 65_536]
    starts = [rng.randrange(10_000, len(DATA) - 80_000) for _ in sizes]
    shift = 512 - 10_000
    got = _plainruns.hex_digests(memoryview(DATA), starts, sizes, shift, 65_536)
    assert got == want(DATA, starts, sizes, shift, 65_536)
    assert got[-3] is None and got[-1] is None and got[-2] == blake3.blake3(b"").hexdigest()


def test_a_member_outside_the_buffer_is_refused():
    with pytest.raises(ValueError):
        _plainruns.hex_digests(b"abc", [0], [4], 0, LIMIT)
    with pytest.raises(ValueError):
        _plainruns.hex_digests(b"abc", [0], [1], -1, LIMIT)
    with pytest.raises(ValueError):
        _plainruns.hex_digests(b"abc", [0, 1], [1], 0, LIMIT)


def test_the_module_holds_the_compression_core_and_not_b3trees_python_types():
    """_plainruns.c includes _b3core.h, the compression both extensions share, not _b3tree.c whole: its shared
    object exports no second PyInit__b3tree (nor carries TreeHasher and Subtree)."""
    assert not hasattr(ctypes.CDLL(_plainruns.__file__), "PyInit__b3tree")
    assert hasattr(ctypes.CDLL(_plainruns.__file__), "PyInit__plainruns")
    if pieces._b3tree is not None:  # the lookup finds the symbol where it is exported
        assert hasattr(ctypes.CDLL(pieces._b3tree.__file__), "PyInit__b3tree")
    with open(_plainruns.__file__, "rb") as fh:
        assert b"TreeHasher" not in fh.read()


@pytest.mark.parametrize("simd", ["avx2", "portable"])
def test_the_narrower_paths_agree(simd):
    code = ("import random, blake3; from cloudvault import _plainruns as m; d = random.Random(1).randbytes(1 << 18)\n"
            "sizes = [random.Random(2).randint(0, 9000) for _ in range(400)] + [0, 1, 64, 1024, 1025, 65535]\n"
            "starts = [random.Random(3).randrange(0, (1 << 18) - 70000) for _ in sizes]\n"
            "got = m.hex_digests(d, starts, sizes, 0, 65536)\n"
            "assert got == [blake3.blake3(d[s:s + n]).hexdigest() for s, n in zip(starts, sizes)], m.SIMD\n"
            "print(m.SIMD)")  # fmt: skip
    assert run_with_simd(code, simd).strip() in (simd, "portable")


def test_the_fallback_gives_the_same_digests(monkeypatch):
    rng = random.Random(9)
    sizes = [rng.randint(0, 3000) for _ in range(200)] + [100_000]
    starts = [rng.randrange(0, len(DATA) - 100_000) for _ in sizes]
    native = hashing.member_hex_digests(DATA, starts, sizes, 0, 65_536)
    monkeypatch.setattr(hashing, "_plainruns", None)
    assert hashing.member_hex_digests(DATA, starts, sizes, 0, 65_536) == native == want(DATA, starts, sizes, 0, 65_536)
