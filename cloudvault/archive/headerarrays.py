"""Many tar headers checked and read at once as the rows of one array (numpy): the headers of a long plain run
(archive/plainruns.py), where a loop over them in Python cost more than decoding their members.

Only the canonical forms that GNU tar, Python's tarfile and bsdtar write are read here: the checksum as six
octal digits, a NUL and a space, matching the unsigned byte sum; mode, uid, gid, size and mtime as octal digits
filling the field but its last byte, a NUL or a space (or, bsdtar's 8-byte fields, but a space and a NUL); no
link name; no ustar prefix. The first header in any other form (or damaged) ends what is read, and
the walk reads it the way it reads any header (tar.py), so what is read here is what it would read.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

BLOCK = 512
# (first byte, digits) of each numeric field, in TarHeader's order
NUMBERS = {"mode": (100, 7), "uid": (108, 7), "gid": (116, 7), "size": (124, 11), "mtime": (136, 11)}
USTAR = np.frombuffer(b"ustar\0", dtype=np.uint8)


def _number(rows: np.ndarray, first: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """A numeric field of width bytes: octal digits, then a NUL or a space in its last byte, or (bsdtar) a space
    then a NUL in its last two; and whether each row's is written so."""
    end = rows[:, first + width - 1]
    full, readable = _octal(rows, first, width - 1)
    readable &= (end == 0) | (end == 32)
    if readable.all():  # every row one way: the other is not looked for
        return full, readable
    short, spaced = _octal(rows, first, width - 2)
    spaced &= (rows[:, first + width - 2] == 32) & (end == 0)
    return np.where(readable, full, short), readable | spaced


def _octal(rows: np.ndarray, first: int, digits: int) -> tuple[np.ndarray, np.ndarray]:
    """The number each row holds at [first, first + digits) as octal digits, and whether it is read so."""
    d = rows[:, first : first + digits].astype(np.int64) - 48
    ok = ((d >= 0) & (d <= 7)).all(axis=1)
    return d @ (8 ** np.arange(digits - 1, -1, -1, dtype=np.int64)), ok


class ReadHeaders(NamedTuple):
    """What read_headers found: how many headers, from the first, are read; their names, each followed by a NUL;
    their numbers (field -> values); and the owner and group fields (32 bytes each) all of them share, if they do."""

    count: int
    names: bytes
    numbers: dict[str, list[int]]
    owner: tuple[bytes, bytes] | None


def read_headers(blocks: bytes, files: list[bool], stored: list[int]) -> ReadHeaders:
    """The headers in blocks (512 bytes each, one after another) from the first on, up to the first that is not in
    canonical form with a right checksum, or has no name, or is a file (files) whose name ends in '/' or whose
    size is not the bytes of data found for it (stored)."""
    rows = np.frombuffer(blocks, dtype=np.uint8).reshape(-1, BLOCK)
    stored_sum, ok = _octal(rows, 148, 6)
    ok &= (rows[:, 154] == 0) & (rows[:, 155] == 32)
    ok &= rows.sum(axis=1, dtype=np.int32) - rows[:, 148:156].sum(axis=1, dtype=np.int32) + 8 * 32 == stored_sum
    numbers = {}
    for field, (first, digits) in NUMBERS.items():
        numbers[field], readable = _number(rows, first, digits + 1)
        ok &= readable
    ok &= rows[:, 157] == 0  # no link name
    ustar = (rows[:, 257:263] == USTAR).all(axis=1)
    ok &= ~ustar | (rows[:, 345] == 0)  # no prefix to join to the name
    name_ends = _name_ends(rows)
    files = np.asarray(files, dtype=bool)
    ok &= (name_ends > 0) & ~(files & (rows[np.arange(len(rows)), np.maximum(name_ends - 1, 0)] == ord("/")))
    ok &= ~files | (numbers["size"] == np.asarray(stored, dtype=np.int64))
    count = len(rows) if ok.all() else int(ok.argmin())
    rows = rows[:count]
    owners = rows[:, 265:329]
    same = bool(count) and bool((owners == owners[0]).all())
    return ReadHeaders(count, _names(rows, name_ends[:count]),
                       {field: values[:count].tolist() for field, values in numbers.items()},
                       (owners[0, :32].tobytes(), owners[0, 32:].tobytes()) if same else None)  # fmt: skip


def _name_ends(rows: np.ndarray) -> np.ndarray:
    """Where each row's name ends: its first NUL in the 100 bytes of the name field, or 100."""
    nul = rows[:, :100] == 0
    return np.where(nul.any(axis=1), nul.argmax(axis=1), 100)


def _names(rows: np.ndarray, ends: np.ndarray) -> bytes:
    """Each row's name (its first ends bytes), each followed by a NUL, in one bytes."""
    named = np.zeros((len(rows), 101), dtype=np.uint8)
    named[:, :100] = rows[:, :100]
    return named[np.arange(101) <= ends[:, None]].tobytes()  # named[i, ends[i]] is a NUL
