"""Piece hashes: an object of more than one PIECE (1 MiB) also gets a hash of each PIECE of it (the last one
shorter), each cut to PIECE_DIGEST (16) bytes and concatenated into one BLOB: 16 bytes per MiB, 15.3 MB per TB of
data (0.0015%). Any range can then be verified by reading only the pieces that cover it. An object of one piece
or less has none: its whole BLAKE3 is its piece's hash. (Kept apart from hashing.py: extract imports this alone.)

Three kinds of BLOB, each saying which it is, all checked everywhere:
- ONE PASS (a BLOB that starts with TREE): each piece's hash is its BLAKE3 chaining value, the inner node the BLAKE3
  tree of the whole object already has at that offset (1 MiB is 1024 chunks: a whole subtree). The native
  cloudvault._b3tree makes them and the whole BLAKE3 in one pass over the bytes. Written where the extension was
  built and the CPU has AVX-512 or AVX2 (ONE_PASS); checked by the extension, or by cloudvault.b3subtree (numpy)
  without it. Written by the multi-threaded hashing of large plain files (hashing.py: one_pass_result).
- ONE PASS WITH FIRST PARTS (starts with FIRST_PARTS): the same, the piece values preceded by the values of the first
  piece's PARTS parts of PART (64 KiB) bytes, the tree's nodes one level of 16 below it (256 bytes more per object,
  made in the same pass): a read of an object's start (the mount's first byte, `head`) is checked by the parts it
  needs, not by decoding and hashing the whole first MiB. Only the first piece: the first byte is where latency is
  felt; a read further on is a stream whose pieces are decoded anyway, and parts of every piece would make the BLOBs
  16 times larger (0.024% of the data, not 0.0015%). Readers that stream whole pieces check the piece values alone.
- TWO PASSES (older catalogs, and where ONE_PASS is off): each piece's own BLAKE3, a second pass beside the whole's.
"""

from __future__ import annotations

import blake3

PIECE = 1 << 20
PIECE_DIGEST = 16
BESIDE_MIN = 256 << 10  # a smaller update is hashed twice where it is: handing it over would cost more
TREE = b"\x01"  # the first byte of a one-pass BLOB; a two-pass BLOB is digests alone (a multiple of 16 bytes)
FIRST_PARTS = b"\x02"  # the first byte of a one-pass BLOB with the first piece's parts before the pieces
PART = 64 << 10
PARTS = PIECE // PART
PART_CHUNKS = PART // 1024


def _native():
    """cloudvault._b3tree, loaded at its first use (a small member's extract, checked by its whole BLAKE3, never
    needs it: ~0.13 ms of its start-up), or None where it was not built (no C compiler where it was installed):
    pieces then take the second pass. `pieces._b3tree` from outside is the same (module __getattr__)."""
    native = globals().get("_b3tree", _native)
    if native is _native:
        try:
            from cloudvault import _b3tree as native
        except ImportError:
            native = None
        globals()["_b3tree"] = native
    return native


def one_pass() -> bool:
    """Whether piece hashes are made in one pass (`pieces.ONE_PASS` from outside): only where it is faster than two.
    The extension's portable code runs ~1 GB/s a core, against blake3's own two passes of ~4-10 GB/s each; its AVX-512
    code ~8 GB/s, its AVX2 code ~3 GB/s (bench/pieces.py, docs/performance.md)."""
    native = _native()
    return native is not None and native.SIMD in ("avx512", "avx2")


def __getattr__(name: str):
    if name == "_b3tree":
        return _native()
    if name == "ONE_PASS":
        return one_pass()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def piece_count(size: int) -> int:
    return (size + PIECE - 1) // PIECE


def piece_digest(data) -> bytes:
    """The two-pass hash of one piece: its BLAKE3, cut to PIECE_DIGEST bytes."""
    return blake3.blake3(data).digest(PIECE_DIGEST)


def read_pieces(blob: bytes | None, size: int) -> tuple[bytes, bool] | None:
    """(the digests, whether they are one-pass chaining values) of a recorded BLOB; None when there is none or it
    does not fit an object of `size` bytes."""
    if blob is None:
        return None
    if blob[:1] == FIRST_PARTS and len(blob) % PIECE_DIGEST == 1:
        digests, tree = blob[1 + PARTS * PIECE_DIGEST :], True
    else:
        tree = blob[:1] == TREE and len(blob) % PIECE_DIGEST == 1
        digests = blob[1:] if tree else blob
    return (digests, tree) if len(digests) == piece_count(size) * PIECE_DIGEST else None


def first_parts(blob: bytes | None, size: int) -> bytes | None:
    """The digests of the first piece's PARTS parts that a FIRST_PARTS BLOB records (None for any other)."""
    if blob is None or blob[:1] != FIRST_PARTS or read_pieces(blob, size) is None:
        return None
    return blob[1 : 1 + PARTS * PIECE_DIGEST]


def piece_hasher(index: int, tree: bool):
    """What checks piece `index` of an object of more than one piece: fed the piece's bytes by update(), its
    digest(PIECE_DIGEST) is the recorded hash."""
    if not tree:
        return blake3.blake3()
    native = _native()
    if native is not None:
        return native.Subtree(index)
    from cloudvault.b3subtree import Subtree  # numpy: only where the extension is missing

    return Subtree(index)


def part_hasher(index: int):
    """What checks part `index` of the first piece of a FIRST_PARTS object: fed its PART bytes by update(), its
    digest(PIECE_DIGEST) is the recorded part hash."""
    native = _native()
    if native is not None:
        return native.Subtree(index, PART_CHUNKS)
    from cloudvault.b3subtree import Subtree  # numpy: only where the extension is missing

    return Subtree(index, PART_CHUNKS)


def piece_value(data, index: int) -> bytes:
    """The 32-byte BLAKE3 chaining value of piece `index` (ONE_PASS only), its bytes given whole."""
    h = _native().Subtree(index)
    h.update(data)
    return h.digest()


def first_piece_values(data) -> tuple[bytes, bytes]:
    """(the 32-byte chaining value of an object's first piece, its PARTS parts' values) from one hashing of its bytes,
    given whole (ONE_PASS only): the parts are the tree's nodes on the way up to the piece's value."""
    h = _native().Subtree(0)
    h.update(data)
    return h.value_and_parts()


def one_pass_result(values: bytes, parts: bytes) -> tuple[str, bytes]:
    """(whole BLAKE3, FIRST_PARTS BLOB) of an object of more than one piece from its pieces' 32-byte values and its
    first piece's parts' values (ONE_PASS only)."""
    return _native().root_of(values).hex(), _one_pass_blob(values, parts)


def _one_pass_blob(values: bytes, parts: bytes = b"") -> bytes:
    """A TREE BLOB of the pieces' 32-byte values, or with the first piece's parts' values a FIRST_PARTS one."""
    if not parts:
        return TREE + _digests(values)
    return FIRST_PARTS + _digests(parts) + _digests(values)


def _digests(values: bytes) -> bytes:
    """32-byte chaining values, each cut to PIECE_DIGEST bytes."""
    return b"".join(values[at : at + PIECE_DIGEST] for at in range(0, len(values), 32))


class PieceHasher:
    """The whole BLAKE3 of a stream and, once it is longer than one PIECE, the hashes of its pieces: in one pass
    where ONE_PASS (`threads` and `beside` then go unused: one core hashes at ~6 GB/s), else in two."""

    def __new__(cls, threads: int = 1, beside=None):
        return super().__new__(OnePassHasher if one_pass() and cls is PieceHasher else cls)

    def __init__(self, threads: int = 1, beside=None) -> None:
        self._whole = blake3.blake3(max_threads=threads)
        self._piece = blake3.blake3()
        self._in_piece = 0
        self._digests = bytearray()
        self.size = 0
        self._beside = beside  # hashing.PieceThread: piece hashes of a large update on another core meanwhile

    def update(self, data) -> None:
        if self._beside is not None and len(data) >= BESIDE_MIN:
            self._beside.run_beside(self._add_pieces, data, self._whole.update)
            return
        self._whole.update(data)
        self._add_pieces(data)

    def _add_pieces(self, data) -> None:
        view = memoryview(data)
        n, i = len(view), 0
        self.size += n
        while i < n:
            take = min(n - i, PIECE - self._in_piece)
            if take == PIECE:  # a whole piece in one view: no copy, no partial state
                self._digests += piece_digest(view[i : i + take])
            else:
                self._piece.update(view[i : i + take])
                self._in_piece += take
                if self._in_piece == PIECE:
                    self._end_piece()
            i += take

    def _end_piece(self) -> None:
        self._digests += self._piece.digest(PIECE_DIGEST)
        self._piece, self._in_piece = blake3.blake3(), 0

    def hexdigest(self) -> str:
        return self._whole.hexdigest()

    def pieces(self) -> bytes | None:
        """The concatenated piece hashes; None for an object of one piece or less."""
        if self.size <= PIECE:
            return None
        if self._in_piece:
            self._end_piece()
        return bytes(self._digests)


class TwoPassHasher(PieceHasher):
    """PieceHasher in two passes wherever ONE_PASS is."""


class OnePassHasher(PieceHasher):
    """PieceHasher in one pass: the whole BLAKE3, the pieces' chaining values and the first piece's parts' values
    from the native tree hasher (a FIRST_PARTS BLOB)."""

    def __init__(self, threads: int = 1, beside=None) -> None:
        self._tree = _native().TreeHasher()
        self._finished: tuple[bytes, bytes] | None = None  # (root, values), made once for hexdigest and pieces
        self.size = 0

    def update(self, data) -> None:
        self._tree.update(data)
        self.size += len(data)
        self._finished = None

    def _result(self) -> tuple[bytes, bytes]:
        if self._finished is None:
            self._finished = self._tree.finish()
        return self._finished

    def hexdigest(self) -> str:
        return self._result()[0].hex()

    def pieces(self) -> bytes | None:
        if self.size <= PIECE:
            return None
        return _one_pass_blob(self._result()[1], self._tree.first_parts())
