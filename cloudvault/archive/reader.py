"""Members out of a zstd archive whose frame table is known: enter at the right frame, read forward."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

import zstandard

from cloudvault.errors import IntegrityError
from cloudvault.models import Frame

CHUNK = 1 << 20
MAX_WINDOW = 1 << 31  # archives made with --long=31 still open
ZIP_LOCAL = b"PK\x03\x04"  # a zip member's local record starts so (archive/zip.py reads it)


def frame_for_offset(frames: list[Frame], raw_offset: int) -> Frame:
    """The frame whose decompressed bytes hold raw_offset (binary search over the frame table)."""
    lo, hi = 0, len(frames) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if frames[mid].raw_offset <= raw_offset:
            lo = mid
        else:
            hi = mid - 1
    return frames[lo]


class ArchiveReader:
    """Forward reads of one archive's decompressed stream, entered at the frame (from the catalog's frame table)
    that holds the first byte wanted, and moving on to a later frame when that is cheaper than reading on.

    The frame table is already known, so this needs no frame walking: zstd's own stream reader decodes, and
    the bytes before a member are decoded into one reused buffer.
    """

    def __init__(
        self, opener: Callable[[], BinaryIO], frames: list[Frame], on_data: Callable[[int], None] | None = None
    ) -> None:
        self._fh = opener()
        self._frames = frames
        self._reader = None
        self._pos = 0
        self._on_data = on_data
        self._scratch: bytearray | None = None  # made on first skip, only as big as the skip needs
        self.frames_read = 0
        self.bytes_decompressed = 0

    def _enter(self, frame: Frame) -> None:
        self._fh.seek(frame.comp_offset)
        dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
        self._reader = dctx.stream_reader(self._fh, read_across_frames=True, closefd=False)  # zstd's 128 KiB reads
        self._pos = frame.raw_offset

    def chunks(self, offset: int, size: int) -> Iterator[bytes]:
        frame = frame_for_offset(self._frames, offset)
        if self._reader is None or offset < self._pos or frame.raw_offset > self._pos:
            self._enter(frame)
        end_frame = frame_for_offset(self._frames, max(offset, offset + size - 1))
        self.frames_read += self._frames.index(end_frame) - self._frames.index(frame) + 1
        try:
            yield from self._read(offset, size)
        except zstandard.ZstdError as exc:
            self._reader = None  # the next read enters its own frame afresh: damage stays in the frames it hit
            raise IntegrityError(detail=f"damaged archive: {exc}; nothing was written") from None
        except IntegrityError:
            self._reader = None
            raise

    def _read(self, offset: int, size: int) -> Iterator[bytes]:
        gap = min(CHUNK, offset - self._pos)
        if gap > 0 and (self._scratch is None or len(self._scratch) < gap):
            self._scratch = bytearray(gap)
        while self._pos < offset:
            got = self._reader.readinto(memoryview(self._scratch)[: min(CHUNK, offset - self._pos)])
            if not got:
                raise IntegrityError(detail="archive ends before the member starts")
            self._pos += got
            self.bytes_decompressed += got
        left = size
        while left:
            data = self._reader.read(min(CHUNK, left))
            if not data:
                raise IntegrityError(detail=f"archive ends {left} bytes before the member's end")
            left -= len(data)
            self._pos += len(data)
            self.bytes_decompressed += len(data)
            if self._on_data:
                self._on_data(len(data))
            yield data

    def close(self) -> None:
        self._fh.close()
