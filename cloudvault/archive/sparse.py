"""GNU sparse members: the maps of data pieces GNU tar writes (old-GNU 'S' headers, pax 0.0, 0.1 and 1.0), checked
as GNU tar checks them, and the expanded bytes (stored pieces with the holes between them as zeros).

A map is a list of (offset, length) pieces of the expanded file, in order; the archive stores only the pieces'
bytes, one after another. The catalog keeps a map as JSON text (`encode_map` / `decode_map`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cloudvault.archive.numbers import parse_number
from cloudvault.models import Hole

Piece = tuple[int, int]
CHUNK = 1 << 20


class SparseMapError(ValueError):
    """A sparse map GNU tar would refuse: a number it cannot read, or pieces that do not fit the file."""


def decimal(text: bytes, what: str) -> int:
    """A non-negative decimal number of a pax sparse record (GNU tar's decode_num: digits only)."""
    if not text.isdigit() or not text.isascii():
        raise SparseMapError(f"{what} {text[:40]!r} is not a number")
    return int(text)


def oldgnu_entries(area: bytes) -> list[Piece]:
    """The pieces in an old-GNU sparse area (24-byte entries: 12-byte octal offset, 12-byte octal length); an
    entry whose offset field is empty ends the list."""
    pieces = []
    for i in range(0, len(area) - 23, 24):
        offset, length = area[i : i + 12], area[i + 12 : i + 24]
        if not offset.strip(b"\0"):
            break
        pieces.append((_octal(offset, "sparse offset"), _octal(length, "sparse length")))
    return pieces


def _octal(field: bytes, what: str) -> int:
    try:
        return parse_number(field)
    except ValueError:
        raise SparseMapError(f"{what} {field.rstrip(bytes(1))!r} is not a number") from None


def pax_map_01(text: bytes) -> list[Piece]:
    """GNU.sparse.map of format 0.1: 'offset,length,offset,length...'."""
    values = [decimal(v, "GNU.sparse.map value") for v in text.split(b",")] if text else []
    if len(values) % 2:
        raise SparseMapError("GNU.sparse.map has an odd number of values")
    return list(zip(values[::2], values[1::2], strict=True))


def pax_map_00(offsets: list[bytes], lengths: list[bytes]) -> list[Piece]:
    """The repeated GNU.sparse.offset / GNU.sparse.numbytes records of format 0.0, in their order."""
    if len(offsets) != len(lengths):
        raise SparseMapError("GNU.sparse.offset and GNU.sparse.numbytes records do not pair up")
    pairs = zip(offsets, lengths, strict=True)
    return [(decimal(o, "GNU.sparse.offset"), decimal(n, "GNU.sparse.numbytes")) for o, n in pairs]


def pax_map_10(head: bytes) -> tuple[list[Piece], int] | None:
    """The map that format 1.0 puts before the data ('count\\n' then 'offset\\nlength\\n' per piece, padded to
    512 bytes), read from the data's first bytes: (pieces, bytes the map takes), or None if head is too short."""
    lines = head.split(b"\n")
    if len(lines) < 2:
        return None
    count = decimal(lines[0], "sparse map count")
    if len(lines) < 2 + 2 * count:
        return None
    values = [decimal(v, "sparse map value") for v in lines[1 : 1 + 2 * count]]
    used = sum(len(v) + 1 for v in lines[: 1 + 2 * count])
    return list(zip(values[::2], values[1::2], strict=True)), used + (-used % 512)


def check_map(pieces: list[Piece], size: int, stored: int) -> None:
    """As GNU tar checks a map before reading (oldgnu_add_sparse): every piece inside the file; and, so that the
    pieces can be expanded in one forward pass, in order without overlap, their bytes all stored."""
    end = 0
    for offset, length in pieces:
        if offset + length > size:
            raise SparseMapError(f"piece {offset}+{length} ends past the file's size {size}")
        if offset < end:
            raise SparseMapError(f"piece at {offset} overlaps or comes before the previous one")
        end = offset + length
    if sum(length for _, length in pieces) > stored:
        raise SparseMapError(f"the pieces hold more bytes than the {stored} stored")


def holes(n: int) -> Iterator[Hole]:
    while n > 0:
        yield Hole(min(n, CHUNK))
        n -= CHUNK


def expand(stored: Iterable[bytes | memoryview], pieces: list[Piece], size: int) -> Iterator[bytes | memoryview]:
    """The expanded file from its stored pieces' bytes (exactly their total, in order): data as views of the
    stored chunks, each valid until the next is asked for; holes as Hole. As GNU tar extracts it, the file ends
    where the map's last piece ends (size, the size the member lists, is past none of them: check_map): the maps
    GNU tar writes end with a zero-length piece at the file's size, and one that ends before the size it lists
    (libarchive's sparse_skip_entry) makes a file that much shorter, though `tar -tv` lists the size."""
    chunks = iter(stored)
    buf = memoryview(b"")
    pos = 0
    for offset, length in pieces:
        yield from holes(offset - pos)
        left = length
        while left:
            if not buf:
                chunk = next(chunks, None)
                if chunk is None:
                    raise SparseMapError(f"the stored data ends {left} bytes short of the map")
                buf = memoryview(chunk)
            piece, buf = buf[:left], buf[left:]
            left -= len(piece)
            yield piece
        pos = offset + length


def encode_map(pieces: list[Piece]) -> str:
    import json  # here: `vault extract` of a member that is not sparse need not load it

    return json.dumps(pieces, separators=(",", ":"))


def decode_map(text: str) -> list[Piece]:
    import json

    return [(offset, length) for offset, length in json.loads(text)]


def stored_size(pieces: list[Piece]) -> int:
    return sum(length for _, length in pieces)


def expanded_size(pieces: list[Piece]) -> int:
    """The size of the file expand() gives: where the map's last piece ends (see expand)."""
    return pieces[-1][0] + pieces[-1][1] if pieces else 0
