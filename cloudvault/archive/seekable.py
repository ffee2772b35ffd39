"""Seekable zstd: raw bytes cut into independent frames of a fixed decompressed size, each with its checksum."""

from __future__ import annotations

import os
from pathlib import Path

import zstandard

from cloudvault.models import Frame

FRAME_RAW = 4 << 20
LEVEL = 3


class SeekableWriter:
    """Raw bytes in, independent zstd frames of FRAME_RAW decompressed bytes out (each with its checksum)."""

    def __init__(self, fh, frame_raw: int = FRAME_RAW, level: int = LEVEL) -> None:
        self._fh = fh
        self._frame_raw = frame_raw
        self._cctx = zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
        self._buf = bytearray()
        self._comp = 0
        self._raw = 0
        self.frames: list[Frame] = []

    def write(self, data: bytes) -> None:
        self._buf += data
        while len(self._buf) >= self._frame_raw:
            self._emit(bytes(self._buf[: self._frame_raw]))
            del self._buf[: self._frame_raw]

    def _emit(self, raw: bytes) -> None:
        comp = self._cctx.compress(raw)
        self._fh.write(comp)
        self.frames.append(Frame(self._comp, len(comp), self._raw, len(raw)))
        self._comp += len(comp)
        self._raw += len(raw)

    def close(self) -> list[Frame]:
        if self._buf:
            self._emit(bytes(self._buf))
            self._buf.clear()
        return self.frames


def needs_copy(frames: list[Frame]) -> bool:
    """Worth a copy: some frame holds far more than one seekable frame would (e.g. `zstd -T0`'s single frame)."""
    return bool(frames) and max(f.raw_size for f in frames) > 2 * FRAME_RAW


def private_folder(folder: Path) -> None:
    """folder and any missing folders above it, made 0700: seekable copies hold the mirror's data (a decompressed
    token included), so they are as private as the catalog."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    for p in reversed(missing):
        p.mkdir(mode=0o700, exist_ok=True)
        os.chmod(p, 0o700)  # mkdir's mode is cut by the umask


def open_private(path: str | Path):
    """A new file for a copy, 0600 whatever the umask."""
    fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    os.fchmod(fd, 0o600)  # a stale file of that name keeps its own mode otherwise
    return os.fdopen(fd, "wb")
