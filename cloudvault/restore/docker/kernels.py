"""`--scan-kernels`: the GPU architectures an image's CUDA libraries really hold, listed by cuobjdump before loading.

The image's layers are read from the archive through the catalog (verified), each shared library in them
(`*.so`, `*.so.N`) is written alone to a temporary file and listed with `cuobjdump --list-elf --list-ptx`. A
library with device code for none of a GPU's architectures is the dashboard's "no kernel image is available for
execution" (NEO's `swiftllm_c`, sm_89 only, on the sm_120 PRO 6000), which an image's recorded arch list can hide.
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from cloudvault.archive.tar import iter_members
from cloudvault.errors import ToolMissing
from cloudvault.models import Member
from cloudvault.tools import cuda, gpu

SHARED_LIBRARY = re.compile(r"\.so(\.\d+)*$")


@dataclass(frozen=True)
class LibraryKernels:
    """A shared library of the image that holds device code, and the targets it holds."""

    path: str
    archs: tuple[gpu.Arch, ...]

    def runs_on(self, cap: tuple[int, int]) -> bool:
        return bool(gpu.fits(list(self.archs), cap))


class ChunkReader:
    """The tar Stream protocol (pos, read, read_some) over an iterator of byte chunks."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._piece = b""
        self.pos = 0

    def read_some(self, n: int) -> bytes:
        if not self._piece:
            self._piece = next(self._chunks, b"")
        out, self._piece = self._piece[:n], self._piece[n:]
        self.pos += len(out)
        return out

    def read(self, n: int) -> bytes:
        parts, have = [], 0
        while have < n and (piece := self.read_some(n - have)):
            parts.append(piece)
            have += len(piece)
        return b"".join(parts)

    def drain(self) -> None:
        while self.read_some(1 << 20):
            pass


def scan_kernels(conn: sqlite3.Connection, layers: list[Member]) -> list[LibraryKernels]:
    """Every shared library with device code in these layer members, in layer order."""
    from cloudvault.io.members import MemberReader, read_order

    tool = cuda.cuobjdump()
    if tool is None:
        raise ToolMissing(tool="cuobjdump", hint=f"{cuda.CUOBJDUMP_HINT}; --check-gpu without --scan-kernels "
                          "checks the image's recorded arch list")  # fmt: skip
    found = []
    with MemberReader(conn) as reader, tempfile.TemporaryDirectory(prefix="vault-kernels-") as work:
        for layer in read_order(layers):
            stream = ChunkReader(iter(reader.open(layer)))
            for header, data in iter_members(stream):
                name = header.name.decode("utf-8", "replace").removeprefix("./")
                if header.type != "file" or not header.size or not SHARED_LIBRARY.search(name):
                    continue
                archs = _list_library(tool, f"{work}/lib.so", data.chunks())
                if archs:
                    found.append(LibraryKernels(name, tuple(archs)))
            stream.drain()  # the rest of the layer, so that its BLAKE3 is checked
    return found


def _list_library(tool: str, path: str, chunks: Iterator[bytes]) -> list[gpu.Arch]:
    with open(path, "wb") as fh:
        for chunk in chunks:
            fh.write(chunk)
    return cuda.listed_archs(path, tool)


def misfits(libraries: list[LibraryKernels], cap: tuple[int, int]) -> list[LibraryKernels]:
    """The libraries with no device code that runs on cap."""
    return [lib for lib in libraries if not lib.runs_on(cap)]
