"""zstd frames: decompress a file in order while recording its frame table, or resume at any frame.

Frame boundaries are found by walking frame and block headers (RFC 8878) as the bytes stream past, and each
frame is fed block by block to a fresh decompressor, so the output of one feed is bounded (≤ 4 MiB) whatever
the compression ratio, and a multi-frame archive can later be entered at any frame.
"""

from __future__ import annotations

import contextlib
import queue
import struct
import threading
from collections import deque
from collections.abc import Callable
from typing import BinaryIO

import zstandard

from cloudvault.models import Frame

ZSTD_MAGIC = 0xFD2FB528
SKIPPABLE_MIN, SKIPPABLE_MAX = 0x184D2A50, 0x184D2A5F
MAX_BLOCK = 128 * 1024
READ_CHUNK = 1 << 20
BLOCKS_PER_FEED = 32  # 32 x 128 KiB: the most one decompress call can return
MAX_WINDOW = 1 << 31  # archives made with --long=31 still open


class ZstdFormatError(Exception):
    """The compressed stream is not zstd, is damaged, or ends early."""

    def __init__(self, kind: str, offset: int, detail: str) -> None:
        self.kind = kind  # not_zstd | corrupt_frame | truncated
        self.offset = offset
        super().__init__(f"{detail} at compressed offset {offset}")


def frame_header_size(descriptor: int) -> int:
    """Bytes from the magic number to the first block header, given the Frame_Header_Descriptor."""
    fcs_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    dict_flag = descriptor & 3
    fcs_size = (0, 2, 4, 8)[fcs_flag] or (1 if single_segment else 0)
    return 4 + 1 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag] + fcs_size


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


class FrameStream:
    """Decompressed bytes of a zstd file, read in order; `frames` grows as each frame ends.

    Start at a frame boundary (`comp_offset`, `raw_offset`) to resume in the middle of a multi-frame file.
    `on_compressed` sees every compressed byte read, for hashing the archive in the same pass; `on_raw` every
    decompressed byte in order, for writing a seekable copy in the same pass.
    """

    def __init__(
        self,
        fh: BinaryIO,
        *,
        comp_offset: int = 0,
        raw_offset: int = 0,
        on_compressed: Callable[[bytes], object] | None = None,
        on_raw: Callable[[bytes], object] | None = None,
    ) -> None:
        self._fh = fh
        fh.seek(comp_offset)
        self._buf = bytearray()
        self._i = 0
        self._buf_offset = comp_offset  # file offset of self._buf[0]
        self._eof_file = False
        self._on_compressed = on_compressed
        self._on_raw = on_raw
        self._out: deque[bytes] = deque()
        self._out_len = 0
        self._head = 0
        self._dobj: zstandard.ZstdDecompressionObj | None = None
        self._frame_start = (comp_offset, raw_offset)
        self._checksum = False
        self._produced = raw_offset
        self._done = False
        self._first = comp_offset == 0
        self.frames: list[Frame] = []
        self.pos = raw_offset

    # -- reading decompressed bytes -------------------------------------------------------------
    def read(self, n: int) -> bytes:
        """Up to n bytes; fewer only at the end of the stream."""
        while self._out_len < n and not self._done:
            self._advance()
        return self._take(min(n, self._out_len))

    def read_exact(self, n: int) -> bytes:
        data = self.read(n)
        if len(data) < n:
            raise EOFError(f"stream ended {n - len(data)} bytes early at offset {self.pos}")
        return data

    def skip(self, n: int) -> int:
        """Discard n bytes; return how many were there."""
        left = n
        while left:
            got = len(self.read(min(left, READ_CHUNK)))
            if not got:
                break
            left -= got
        return n - left

    def drain(self) -> None:
        """Read to the end, so that the frame table and the compressed hash are complete."""
        while not self._done:
            self._advance()
            self._take(self._out_len)

    def _take(self, n: int) -> bytes:
        """Pop n output bytes; `_head` indexes into the first piece so small reads copy only themselves."""
        if n == 0:
            return b""
        parts, left = [], n
        while left:
            piece = self._out[0]
            step = min(left, len(piece) - self._head)
            parts.append(piece[self._head : self._head + step] if step < len(piece) else piece)
            self._head += step
            left -= step
            if self._head == len(piece):
                self._out.popleft()
                self._head = 0
        self._out_len -= n
        self.pos += n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    # -- walking the compressed stream ----------------------------------------------------------
    @property
    def _offset(self) -> int:
        return self._buf_offset + self._i

    def _available(self) -> int:
        return len(self._buf) - self._i

    def _fill(self, need: int) -> bool:
        """Make at least `need` compressed bytes available; False if the file ends first."""
        while self._available() < need and not self._eof_file:
            chunk = self._fh.read(max(READ_CHUNK, need))
            if not chunk:
                self._eof_file = True
                break
            if self._on_compressed:
                self._on_compressed(chunk)
            self._buf_offset += self._i
            del self._buf[: self._i]  # CPython moves the start pointer: no copy of what is left
            self._buf += chunk
            self._i = 0
        return self._available() >= need

    def _consume(self, n: int) -> memoryview:
        view = memoryview(self._buf)[self._i : self._i + n]
        self._i += n
        return view

    def _advance(self) -> None:
        if self._dobj is None:
            self._start_frame()
        else:
            self._feed_blocks()

    def _start_frame(self) -> None:
        if not self._fill(4):
            if self._available():
                raise ZstdFormatError("truncated", self._offset, "partial frame magic")
            self._done = True
            return
        (magic,) = struct.unpack_from("<I", self._buf, self._i)
        if SKIPPABLE_MIN <= magic <= SKIPPABLE_MAX:
            self._skip_skippable()
            return
        if magic != ZSTD_MAGIC:
            kind = "not_zstd" if self._first else "corrupt_frame"
            raise ZstdFormatError(kind, self._offset, f"bad frame magic {magic:#010x}")
        if not self._fill(5):
            raise ZstdFormatError("truncated", self._offset, "frame header cut short")
        descriptor = self._buf[self._i + 4]
        if descriptor & 0x08:
            raise ZstdFormatError("corrupt_frame", self._offset, "reserved bit set in frame header")
        size = frame_header_size(descriptor)
        if not self._fill(size):
            raise ZstdFormatError("truncated", self._offset, "frame header cut short")
        self._first = False
        self._checksum = bool(descriptor & 0x04)
        self._frame_start = (self._offset, self._produced)
        self._dobj = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW).decompressobj()
        self._decompress(self._consume(size))

    def _skip_skippable(self) -> None:
        if not self._fill(8):
            raise ZstdFormatError("truncated", self._offset, "skippable frame header cut short")
        (length,) = struct.unpack_from("<I", self._buf, self._i + 4)
        self._consume(8)
        left = length
        while left:
            if not self._fill(1):
                raise ZstdFormatError("truncated", self._offset, "skippable frame cut short")
            step = min(left, self._available())
            self._consume(step)
            left -= step
        self._first = False

    def _feed_blocks(self) -> None:
        """Hand up to BLOCKS_PER_FEED whole blocks to the decompressor; close the frame after its last.

        Blocks are gathered from what is already buffered; the buffer is refilled only when not even one whole
        block is there, so a refill copies at most a block's worth of leftover bytes.
        """
        cur = 0  # bytes past self._i gathered for this feed
        last = False
        for _ in range(BLOCKS_PER_FEED):
            if self._available() < cur + 3 and (cur or not self._fill(3)):
                if cur:
                    break
                raise ZstdFormatError("truncated", self._offset, "block header cut short")
            at = self._i + cur
            header = self._buf[at] | self._buf[at + 1] << 8 | self._buf[at + 2] << 16
            last = bool(header & 1)
            block_type = (header >> 1) & 3
            block_size = header >> 3
            if block_type == 3 or block_size > MAX_BLOCK:
                raise ZstdFormatError("corrupt_frame", self._offset + cur, "invalid block header")
            need = cur + 3 + (1 if block_type == 1 else block_size) + (4 if last and self._checksum else 0)
            if self._available() < need:
                if cur:
                    last = False
                    break
                if not self._fill(need):
                    raise ZstdFormatError("truncated", self._offset, "block cut short")
            cur = need
            if last:
                break
        self._decompress(self._consume(cur))
        if last:
            self._end_frame()

    def _decompress(self, data: memoryview) -> None:
        try:
            out = self._dobj.decompress(data)
        except zstandard.ZstdError as exc:
            raise ZstdFormatError("corrupt_frame", self._frame_start[0], f"zstd: {exc}") from None
        if out:
            if self._on_raw:
                self._on_raw(out)
            self._out.append(out)
            self._out_len += len(out)
            self._produced += len(out)

    def _end_frame(self) -> None:
        if not self._dobj.eof:
            raise ZstdFormatError("corrupt_frame", self._frame_start[0], "frame did not end at its last block")
        comp_start, raw_start = self._frame_start
        self.frames.append(Frame(comp_start, self._offset - comp_start, raw_start, self._produced - raw_start))
        self._dobj = None


class ThreadedFrameStream(FrameStream):
    """A FrameStream whose walking and decompressing run one step ahead in a thread (zstd releases the GIL),
    so hashing what was read overlaps decompressing what comes next. Errors surface in the reader."""

    def __init__(self, fh: BinaryIO, **kwargs) -> None:
        super().__init__(fh, **kwargs)
        self._inner = FrameStream(fh, **kwargs)
        self._queue: queue.Queue = queue.Queue(maxsize=4)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="zstd-decompress", daemon=True)
        self._thread.start()

    @property
    def frames(self) -> list[Frame]:
        return self._inner.frames

    @frames.setter
    def frames(self, value: list[Frame]) -> None:  # the base class's __init__ assigns it
        pass

    def _produce(self) -> None:
        inner = self._inner
        try:
            while not inner._done and not self._stop.is_set():
                inner._advance()
                while inner._out:
                    piece = inner._out.popleft()
                    inner._out_len -= len(piece)
                    self._queue.put(piece)
            self._queue.put(None)
        except BaseException as exc:  # handed to the reading thread
            self._queue.put(exc)

    def _advance(self) -> None:
        item = self._queue.get()
        if item is None:
            self._done = True
        elif isinstance(item, BaseException):
            self._done = True
            raise item
        else:
            self._out.append(item)
            self._out_len += len(item)

    def close(self) -> None:
        """Stop the thread early (the reader gave up); safe to call after the end too."""
        self._stop.set()
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=0.05)
        self._done = True
