"""Members out of a zstd archive whose frame table is known: enter at the right frame, read forward."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

import zstandard

from cloudvault.archive.zstdframes import MAX_WINDOW, frame_for_offset
from cloudvault.errors import IntegrityError
from cloudvault.models import Frame

CHUNK = 1 << 20


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
        self._scratch = bytearray(CHUNK)
        self.frames_read = 0
        self.bytes_decompressed = 0

    def _enter(self, frame: Frame) -> None:
        self._fh.seek(frame.comp_offset)
        dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
        self._reader = dctx.stream_reader(self._fh, read_size=CHUNK, read_across_frames=True, closefd=False)
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
        view = memoryview(self._scratch)
        while self._pos < offset:
            got = self._reader.readinto(view[: min(CHUNK, offset - self._pos)])
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
