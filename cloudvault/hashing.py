"""BLAKE3 helpers: streaming over chunks, multi-threaded over big files."""

from __future__ import annotations

import os
from collections.abc import Iterable

import blake3

CHUNK = 1 << 20
MMAP_THRESHOLD = 16 << 20


def new_hasher() -> blake3.blake3:
    return blake3.blake3()


def hash_chunks(chunks: Iterable[bytes]) -> str:
    h = blake3.blake3()
    for chunk in chunks:
        h.update(chunk)
    return h.hexdigest()


def hash_file(path: str | bytes | os.PathLike) -> str:
    """BLAKE3 of a file; big files are memory-mapped and hashed on all cores."""
    size = os.stat(path).st_size
    if size >= MMAP_THRESHOLD:
        h = blake3.blake3(max_threads=blake3.blake3.AUTO)
        h.update_mmap(os.fsdecode(path))
        return h.hexdigest()
    h = blake3.blake3()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()
