"""zstd frames: decompress a file in order while recording its frame table, or resume at any frame.

Frame boundaries are found by walking frame and block headers (RFC 8878) over the compressed bytes as they
stream past; zstd's own stream reader decodes one frame at a time from a source that ends at the frame's last
byte, so each frame's decompressed size is known when it ends, reads return at most what was asked whatever
the compression ratio, and a multi-frame archive can later be entered at any frame.
"""

from __future__ import annotations

import contextlib
import struct
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

import zstandard

from cloudvault.archive.reader import MAX_WINDOW
from cloudvault.models import Frame

if TYPE_CHECKING:  # queue and threading are imported where the threaded streams use them: `vault extract` never does
    import queue
    import threading

ZSTD_MAGIC = 0xFD2FB528
SKIPPABLE_MIN, SKIPPABLE_MAX = 0x184D2A50, 0x184D2A5F
MAX_BLOCK = 128 * 1024
READ_CHUNK = 1 << 20


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


def looks_multi_frame(head: bytes, file_size: int) -> bool:
    """From a file's first bytes: likely many frames (pzstd's leading skippable frame, or a first frame whose
    recorded content size is small against the file), so worth decoding frames in parallel."""
    if len(head) < 6:
        return False
    (magic,) = struct.unpack_from("<I", head)
    if SKIPPABLE_MIN <= magic <= SKIPPABLE_MAX:
        return True
    if magic != ZSTD_MAGIC:
        return False
    descriptor = head[4]
    fcs_flag, single = descriptor >> 6, (descriptor >> 5) & 1
    size = (0, 2, 4, 8)[fcs_flag] or (1 if single else 0)
    if size == 0:
        return False
    start = 5 + (0 if single else 1) + (0, 1, 2, 4)[descriptor & 3]
    if len(head) < start + size:
        return False
    content = int.from_bytes(head[start : start + size], "little") + (256 if size == 2 else 0)
    return content <= 64 << 20 and file_size > 2 * (content // 8 + 1)


FOREIGN_MAGIC = (  # what a file named .tar.zst really is, when it is something else (by its first bytes)
    (b"\x1f\x8b", "gzip (`tar -xzf` reads it)"),
    (b"\xfd7zXZ\x00", "xz (`tar -xJf` reads it)"),
    (b"BZh", "bzip2 (`tar -xjf` reads it)"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"PK\x03\x04", "zip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
)


def sniff_format(head: bytes) -> str | None:
    """Name the format of a file that is not zstd, from its first 512 bytes; None if unknown."""
    for magic, what in FOREIGN_MAGIC:
        if head.startswith(magic):
            return what
    if head[257:262] == b"ustar":
        return "an uncompressed tar archive (`tar -xf` reads it)"
    return None


class _FrameSource:
    """The compressed file as zstd's stream reader sees it: one frame at a time, ending at that frame's last byte.

    It walks block headers just ahead of what it serves, so it knows where the frame ends without decoding.
    """

    def __init__(self, fh: BinaryIO, offset: int, on_compressed: Callable[[bytes], object] | None) -> None:
        self._fh = fh
        self._on_compressed = on_compressed
        self._chunks: deque[tuple[int, bytes]] = deque()  # (file offset, bytes) as read, none before self.pos
        self._end = offset  # file offset after the last chunk read
        self._eof = False
        self.pos = offset  # next byte to serve
        self._safe = offset  # bytes before this are known to lie inside the current frame
        self._walk = offset  # next block header to parse
        self._checksum = False
        self.frame_end: int | None = None  # set when the last block has been parsed
        self.first = offset == 0

    # -- buffer: the file's chunks as read, served without copying where a read covers a whole chunk -------
    def _have(self, end: int) -> bool:
        """Read the file up to absolute offset end; False if the file ends first."""
        while self._end < end and not self._eof:
            chunk = self._fh.read(max(READ_CHUNK, end - self._end))
            if not chunk:
                self._eof = True
                break
            if self._on_compressed:
                self._on_compressed(chunk)
            self._chunks.append((self._end, chunk))
            self._end += len(chunk)
        return self._end >= end

    def _bytes(self, start: int, n: int) -> bytes:
        """n bytes from start (within what is buffered), joined across chunks if need be."""
        parts = []
        for offset, chunk in self._chunks:
            if offset + len(chunk) <= start:
                continue
            if offset >= start + n:
                break
            parts.append(chunk[max(0, start - offset) : start + n - offset])
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _byte(self, at: int) -> int:
        for offset, chunk in self._chunks:
            if at < offset + len(chunk):
                return chunk[at - offset]
        raise IndexError(at)

    def _advance_to(self, pos: int) -> None:
        self.pos = pos
        while self._chunks and self._chunks[0][0] + len(self._chunks[0][1]) <= pos:
            self._chunks.popleft()

    # -- frames ---------------------------------------------------------------------------------------------
    def next_frame(self) -> bool:
        """Position at the next zstd frame's header (skipping skippable frames); False at the end of the file."""
        while True:
            start = self.pos
            if not self._have(start + 4):
                if self._end > start:
                    tail = self._bytes(start, self._end - start)
                    if self.first and not ZSTD_MAGIC.to_bytes(4, "little").startswith(tail):  # a few bytes of text
                        raise ZstdFormatError("not_zstd", start, "not zstd (too short for a frame magic)")
                    raise ZstdFormatError("truncated", start, "partial frame magic")
                return False
            (magic,) = struct.unpack("<I", self._bytes(start, 4))
            if not SKIPPABLE_MIN <= magic <= SKIPPABLE_MAX:
                break
            self._skip_skippable(start)
        if magic != ZSTD_MAGIC:
            self._refuse_magic(start, magic)
        if not self._have(start + 5):
            raise ZstdFormatError("truncated", start, "frame header cut short")
        descriptor = self._byte(start + 4)
        if descriptor & 0x08:
            raise ZstdFormatError("corrupt_frame", start, "reserved bit set in frame header")
        size = frame_header_size(descriptor)
        if not self._have(start + size):
            raise ZstdFormatError("truncated", start, "frame header cut short")
        self.first = False
        self._checksum = bool(descriptor & 0x04)
        self._safe = self._walk = start + size
        self.frame_end = None
        return True

    def _skip_skippable(self, start: int) -> None:
        """Step over a skippable frame (pzstd's index, a seekable table) at start."""
        if not self._have(start + 8):
            raise ZstdFormatError("truncated", start, "skippable frame header cut short")
        (length,) = struct.unpack("<I", self._bytes(start + 4, 4))
        if not self._have(start + 8 + length):
            raise ZstdFormatError("truncated", start, "skippable frame cut short")
        self._advance_to(start + 8 + length)
        self.first = False

    def _refuse_magic(self, start: int, magic: int) -> None:
        """Not a zstd frame: at the start of the file, say what the file is instead (gzip, xz, plain tar)."""
        if not self.first:
            raise ZstdFormatError("corrupt_frame", start, f"bad frame magic {magic:#010x}")
        self._have(start + 512)
        what = sniff_format(self._bytes(start, min(512, self._end - start)))
        detail = f"not zstd but {what}" if what else f"not zstd (bad frame magic {magic:#010x})"
        raise ZstdFormatError("not_zstd", start, detail)

    def _walk_blocks(self, want: int) -> None:
        """Parse block headers until bytes up to want are known to be inside the frame, or the frame ends."""
        while self._safe < want and self.frame_end is None:
            at = self._walk
            if not self._have(at + 3):
                raise ZstdFormatError("truncated", at, "block header cut short")
            h = self._bytes(at, 3)
            header = h[0] | h[1] << 8 | h[2] << 16
            block_type = (header >> 1) & 3
            block_size = header >> 3
            if block_type == 3 or block_size > MAX_BLOCK:
                raise ZstdFormatError("corrupt_frame", at, "invalid block header")
            end = at + 3 + (1 if block_type == 1 else block_size)
            if header & 1:
                end += 4 if self._checksum else 0
                self.frame_end = end
            self._walk = self._safe = end

    @property
    def read_end(self) -> int:
        """File offset after the last byte read so far."""
        return self._end

    def take_frame(self, stop: threading.Event, limit: int) -> list[memoryview] | None:
        """The current frame's compressed bytes, as views into the chunks read (each read once, never copied),
        when the frame is at most limit bytes long; None if it is longer (nothing is dropped: skip_frame then
        walks on) or stop was set first."""
        start = self.pos
        while self.frame_end is None:
            if stop.is_set() or self._walk - start > limit:
                return None
            self._walk_blocks(self._walk + READ_CHUNK)
        if self.frame_end - start > limit:
            return None
        if not self._have(self.frame_end):  # the headers promise more than the file holds
            raise ZstdFormatError("truncated", self._end, "frame cut short")
        views = []
        for offset, chunk in self._chunks:
            if offset >= self.frame_end:
                break
            lo, hi = max(0, start - offset), min(len(chunk), self.frame_end - offset)
            if hi > lo:
                views.append(memoryview(chunk)[lo:hi])
        self._advance_to(self.frame_end)
        return views

    def skip_frame(self, stop: threading.Event | None = None) -> int | None:
        """Walk to the current frame's end without serving it (chunks are dropped as the walk passes them);
        None if stop was set first (a frame can be a whole 17 GB archive)."""
        while self.frame_end is None:
            if stop is not None and stop.is_set():
                return None
            self._walk_blocks(self._walk + 1)
            self._advance_to(self._walk)
        if not self._have(self.frame_end):  # the headers promise more than the file holds
            raise ZstdFormatError("truncated", self._end, "frame cut short")
        self._advance_to(self.frame_end)
        return self.frame_end

    def read(self, n: int) -> bytes:
        """Called by zstd's reader: up to n bytes of the current frame; b'' at its end."""
        self._walk_blocks(self.pos + n)
        end = min(self.pos + n, self._safe)
        if end <= self.pos:
            return b""
        if not self._have(self.pos + 1):
            raise ZstdFormatError("truncated", self._end, "frame cut short")
        offset, chunk = self._chunks[0]
        end = min(end, offset + len(chunk))  # a short read at a chunk's end; zstd asks again
        start = self.pos - offset
        data = chunk if start == 0 and end == offset + len(chunk) else chunk[start : end - offset]
        self._advance_to(end)
        return data


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
        fh.seek(comp_offset)
        self._source = _FrameSource(fh, comp_offset, on_compressed)
        self._on_raw = on_raw
        self._reader = None
        self._frame_start = (comp_offset, raw_offset)
        self._done = False
        self._scratch: bytearray | None = None
        self.frames: list[Frame] = []
        self.pos = raw_offset

    def _next_reader(self) -> bool:
        if not self._source.next_frame():
            self._done = True
            return False
        self._frame_start = (self._source.pos, self.pos)
        dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
        self._reader = dctx.stream_reader(self._source, read_size=READ_CHUNK, read_across_frames=False)
        return True

    def _end_frame(self) -> None:
        comp_start, raw_start = self._frame_start
        if self._source.frame_end is None or self._source.pos != self._source.frame_end:
            raise ZstdFormatError("corrupt_frame", comp_start, "frame ended before its last block")
        self.frames.append(Frame(comp_start, self._source.pos - comp_start, raw_start, self.pos - raw_start))
        self._reader = None

    def _read_some(self, n: int, into: memoryview | None = None) -> int | bytes:
        """One read from the current frame, moving across frame ends; b''/0 only at the end of the file (or for
        n = 0, which must not end the frame: the tar parser asks for 0 bytes of padding after some members)."""
        if n <= 0:
            return 0 if into is not None else b""
        while not self._done:
            if self._reader is None and not self._next_reader():
                break
            try:
                got = self._reader.readinto(into[:n]) if into is not None else self._reader.read(n)
            except zstandard.ZstdError as exc:
                raise ZstdFormatError("corrupt_frame", self._frame_start[0], f"zstd: {exc}") from None
            if got:
                size = got if into is not None else len(got)
                if self._on_raw:
                    self._on_raw(bytes(into[:size]) if into is not None else got)
                self.pos += size
                return got
            self._end_frame()
        return 0 if into is not None else b""

    def read_some(self, n: int) -> bytes:
        """Up to n bytes, as they come from the decoder (fewer than n is not the end); b'' only at the end."""
        return self._read_some(n)

    def read(self, n: int) -> bytes:
        """Up to n bytes; fewer only at the end of the stream."""
        data = self._read_some(n)
        if len(data) == n or not data:
            return data
        parts, have = [data], len(data)
        while have < n and (more := self._read_some(n - have)):
            parts.append(more)
            have += len(more)
        return b"".join(parts)

    def skip(self, n: int) -> int:
        """Decode and discard n bytes (into one reused buffer); return how many were there."""
        if self._scratch is None:
            self._scratch = bytearray(READ_CHUNK)
        view, left = memoryview(self._scratch), n
        while left and (got := self._read_some(min(left, READ_CHUNK), view)):
            left -= got
        return n - left

    def drain(self) -> None:
        """Read to the end, so that the frame table and the compressed hash are complete."""
        while self.skip(READ_CHUNK):
            pass


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters (malloc.h)
_malloc_tuned: list[bool] = []


def keep_freed_memory() -> None:
    """Decoded 1 MiB pieces are made in one thread and freed in another; with glibc's defaults each is mapped
    and unmapped, or the heap is trimmed and grown again, so every page of output faults (160k minor faults per
    GB). Pieces come from the heap instead and freed memory is kept for the next ones (up to 64 MiB), once per
    process; nothing where libc is not glibc."""
    if _malloc_tuned:
        return
    _malloc_tuned.append(True)
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, 4 << 20)
    mallopt(M_TRIM_THRESHOLD, 64 << 20)


def _nothing() -> None:
    pass


PIECE = 4 << 20  # decoded bytes handed over at a time
RING = 3  # decode buffers per decoding thread


class ThreadedFrameStream(FrameStream):
    """A FrameStream whose decoding runs a step ahead in a thread (zstd releases the GIL), so hashing what was
    read overlaps decoding what comes next. Errors surface in the reader.

    The decoding thread fills a small ring of buffers of its own, which the reader hands back once it has read
    them: no decoded byte lands in freshly allocated memory, and the buffers stay in the CPU's caches."""

    def __init__(self, fh: BinaryIO, **kwargs) -> None:
        import queue
        import threading

        self._inner = FrameStream(fh, **kwargs)
        self._queue: queue.Queue = queue.Queue()  # bounded by the ring: at most RING pieces wait
        self._setup()
        self.pos = self._inner.pos
        self._thread = threading.Thread(target=self._produce, name="zstd-decode", daemon=True)
        self._thread.start()

    def _setup(self) -> None:
        import threading

        keep_freed_memory()
        self._stop = threading.Event()
        self._rings = threading.local()
        self._held: tuple[bytearray, queue.Queue] | None = None  # the buffer being read, and its ring
        self._pin_lock = threading.Lock()
        self._pins: dict[int, int] = {}  # id of a buffer -> views of it other threads still read
        self._retired: set[int] = set()  # pinned buffers the reader is done with: back to their ring when unpinned
        self._piece: bytes | memoryview = b""
        self._at, self._done, self.pos, self._scratch = 0, False, 0, None

    @property
    def frames(self) -> list[Frame]:
        return self._inner.frames

    def _produce(self) -> None:
        try:
            ring = self._ring()
            while (buf := self._take(ring)) is not None:
                got = self._inner._read_some(len(buf), memoryview(buf))
                if not got:
                    ring.put(buf)
                    break
                self._queue.put((buf, got, ring))
            self._queue.put(None)
        except BaseException as exc:  # handed to the reading thread
            self._queue.put(exc)

    def _ring(self) -> queue.Queue:
        """The calling thread's free buffers (made on its first use)."""
        ring = getattr(self._rings, "free", None)
        if ring is None:
            import queue

            ring = self._rings.free = queue.Queue()
            for _ in range(RING):
                ring.put(bytearray(PIECE))
        return ring

    def _take(self, q: queue.Queue):
        """The next item of q, or None once the reader has stopped."""
        import queue

        while not self._stop.is_set():
            with contextlib.suppress(queue.Empty):
                return q.get(timeout=0.05)
        return None

    def _release(self) -> None:
        """Hand the buffer just read back to the thread that filled it (once no pinned view of it is read)."""
        if self._held is not None:
            buf, ring = self._held
            self._held = None
            with self._pin_lock:
                if id(buf) in self._pins:
                    self._retired.add(id(buf))
                    return
            ring.put(buf)

    def pin(self) -> Callable[[], None]:
        """Keep the piece being read (the one the last read_view came from) from being filled again until the
        function returned is called, from any thread: a view of it handed to another thread stays valid so long.
        A decoder whose buffers are all pinned waits, so pinning holds back decoding, never memory."""
        if self._held is None:
            return _nothing
        buf, ring = self._held
        key = id(buf)
        with self._pin_lock:
            self._pins[key] = self._pins.get(key, 0) + 1

        def unpin() -> None:
            with self._pin_lock:
                left = self._pins.pop(key) - 1
                if left:
                    self._pins[key] = left
                    return
                if key not in self._retired:
                    return
                self._retired.discard(key)
            ring.put(buf)

        return unpin

    def _hold(self, item: tuple[bytearray, int, queue.Queue]) -> memoryview:
        buf, got, ring = item
        self._held = (buf, ring)
        return memoryview(buf)[:got]

    def _next_piece(self) -> memoryview | None:
        """The next decoded piece (a view valid until the next read); None at the end of the stream."""
        self._release()
        item = self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return None if item is None else self._hold(item)

    def _step(self, n: int) -> int:
        """Make sure a piece is at hand; how many of the next n bytes it holds (0 at the end)."""
        if self._at == len(self._piece):
            piece = None if self._done else self._next_piece_or_end()
            if piece is None:
                return 0
            self._piece, self._at = piece, 0
        return min(n, len(self._piece) - self._at)

    def _read_some(self, n: int, into: memoryview | None = None) -> int | bytes:
        step = self._step(n) if n > 0 else 0
        if not step:
            return 0 if into is not None else b""
        chunk = self._piece[self._at : self._at + step]
        self._at += step
        self.pos += step
        if into is not None:
            into[:step] = chunk
            return step
        return bytes(chunk)  # a copy: the piece's buffer is filled again once handed back

    def read(self, n: int) -> bytes:
        at = self._at
        if 0 < n <= len(self._piece) - at:  # the usual case (a tar header): inside the piece at hand
            self._at, self.pos = at + n, self.pos + n
            return bytes(self._piece[at : at + n])
        return super().read(n)

    def read_view(self, n: int) -> memoryview:
        """Like read_some, but a view into the decoded piece rather than a copy of it, valid until the next read
        (the buffer is then filled again): for hashing a member's data without copying it once more."""
        step = self._step(n) if n > 0 else 0
        view = memoryview(self._piece)[self._at : self._at + step]
        self._at += step
        self.pos += step
        return view

    def at_hand(self) -> tuple[memoryview, int]:
        """The decoded piece being read (the next one once it is read to its end; empty at the end of the stream)
        and where reading stands in it: for reading many small things in place (archive/plainruns.py), valid until
        the next read; passed(n) then moves past what was read there."""
        self._step(1)
        return memoryview(self._piece), self._at

    def passed(self, n: int) -> None:
        self._at += n
        self.pos += n

    def _next_piece_or_end(self) -> memoryview | None:
        try:
            piece = self._next_piece()
        except BaseException:
            self._done = True
            raise
        if piece is None:
            self._done = True
        return piece

    def stop(self) -> None:
        """Tell the decoding threads to end, waiting for nothing: what a signal handler may call (it can run inside
        a queue's lock in the reading thread, so neither a queue nor a join is touched here); close() waits."""
        self._stop.set()

    def close(self) -> None:
        """Stop the thread early (the reader gave up); safe to call after the end too."""
        self._stop.set()
        self._thread.join()
        self._done = True


class _Range:
    """A byte range of a file, read from its start: what the decoder of a frame too long to hold in memory sees."""

    def __init__(self, fh: BinaryIO, start: int, end: int) -> None:
        fh.seek(start)
        self._fh, self._left = fh, end - start

    def read(self, n: int) -> bytes:
        data = self._fh.read(min(n, self._left)) if self._left > 0 else b""
        self._left -= len(data)
        return data


class _Views:
    """A frame's compressed bytes as the splitter read them, served to zstd's reader without a copy."""

    def __init__(self, views: list[memoryview]) -> None:
        self._views = deque(views)

    def read(self, n: int) -> memoryview | bytes:
        if not self._views:
            return b""
        view = self._views.popleft()
        if len(view) > n:
            self._views.appendleft(view[n:])
            view = view[:n]
        return view


class _FrameJob:
    """One frame to decode: its compressed bytes (or, for a long frame, its range in the file), and the decoded
    pieces handed over in order."""

    def __init__(self, start: int, end: int, error: BaseException | None = None, partial: bool = False,
                 views: list[memoryview] | None = None) -> None:  # fmt: skip
        import queue

        self.start, self.end, self.error, self.partial, self.views = start, end, error, partial, views
        self.pieces: queue.Queue = queue.Queue(maxsize=RING)


FRAME_IN_MEMORY = 16 << 20  # a frame with more compressed bytes is read again by its decoder, not held


class ParallelFrameStream(ThreadedFrameStream):
    """Frames decoded by `decoders` threads at once (zstd frames are independent), handed over in order.

    A splitter thread reads the file once, in order: it hashes the compressed bytes as they pass, walks frame
    and block headers to find where each frame ends, and hands each frame's bytes (views of what it read, no copy)
    to a decoder. Each decoder thread decodes into a small ring of buffers of its own that the reader hands back
    once it has read them, so no decoded byte lands in freshly mapped memory. A frame too long to hold is read
    again by its decoder through its own file handle (`opener`). An archive of one frame decodes as fast as with
    one thread; a pzstd or seekable archive decodes on as many cores as it is given decoders: each decoder runs
    at most one frame ahead of the reader (its ring holds a frame's pieces), so the frames decoded ahead of the
    tar walk are an ordered window of about `decoders` frames.
    """

    def __init__(self, fh: BinaryIO, opener: Callable[[], BinaryIO], decoders: int = 2, **kwargs) -> None:
        import queue
        import threading
        from concurrent.futures import ThreadPoolExecutor  # not on `vault extract`'s start-up path

        self._setup()
        self._opener = opener
        self._on_raw = kwargs.get("on_raw")
        self._jobs: queue.Queue = queue.Queue(maxsize=decoders + 2)
        self._job: _FrameJob | None = None
        self._raw_start = 0
        self._frames: list[Frame] = []
        self._pool = ThreadPoolExecutor(decoders, thread_name_prefix="zstd-frame")
        self._thread = threading.Thread(target=self._split, args=(fh, kwargs.get("on_compressed")), daemon=True)
        self._thread.start()

    @property
    def frames(self) -> list[Frame]:
        return self._frames

    def _split(self, fh: BinaryIO, on_compressed) -> None:
        source = _FrameSource(fh, 0, on_compressed)
        try:
            while not self._stop.is_set() and source.next_frame():
                start = source.pos
                try:
                    views = source.take_frame(self._stop, FRAME_IN_MEMORY)
                    end = source.pos if views is not None else source.skip_frame(self._stop)
                except ZstdFormatError as exc:  # decode what there is, then report the damage
                    self._submit(_FrameJob(start, source.read_end, partial=True))
                    self._put(self._jobs, _FrameJob(start, start, exc))
                    return
                if end is None:
                    return
                self._submit(_FrameJob(start, end, views=views))
            self._put(self._jobs, None)
        except BaseException as exc:
            self._put(self._jobs, _FrameJob(0, 0, exc))

    def _put(self, q: queue.Queue, item) -> bool:
        """Hand over unless the reader has stopped; False if it has."""
        import queue

        while not self._stop.is_set():
            with contextlib.suppress(queue.Full):
                q.put(item, timeout=0.05)
                return True
        return False

    def _submit(self, job: _FrameJob) -> None:
        self._pool.submit(self._decode, job)
        self._put(self._jobs, job)

    def _decode(self, job: _FrameJob) -> None:
        try:
            with contextlib.ExitStack() as stack:
                if job.views is not None:
                    source = _Views(job.views)
                else:
                    source = _Range(stack.enter_context(self._opener()), job.start, job.end)
                dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
                reader = dctx.stream_reader(source, read_size=READ_CHUNK, read_across_frames=False)
                self._decode_into_ring(reader, job)
            job.views = None
            self._put(job.pieces, None)
        except zstandard.ZstdError as exc:  # a cut-short last frame ends where the data ends
            self._put(job.pieces, None if job.partial else ZstdFormatError("corrupt_frame", job.start, f"zstd: {exc}"))
        except BaseException as exc:
            self._put(job.pieces, exc)

    def _decode_into_ring(self, reader, job: _FrameJob) -> None:
        ring = self._ring()
        while (buf := self._take(ring)) is not None:
            try:
                got = reader.readinto(buf)
            except BaseException:
                ring.put(buf)
                raise
            if not got:
                ring.put(buf)
                return
            if not self._put(job.pieces, (buf, got, ring)):
                return

    def _next_piece(self) -> memoryview | None:
        """The next decoded piece in file order (a view valid until the next read); None at the end."""
        self._release()
        while True:
            if self._job is None:
                job = self._jobs.get()
                if job is None:
                    return None
                if job.error is not None:
                    raise job.error
                self._job, self._raw_start = job, self.pos
            item = self._job.pieces.get()
            if isinstance(item, BaseException):
                raise item
            if item is not None:
                piece = self._hold(item)
                if self._on_raw:
                    self._on_raw(piece)
                return piece
            job = self._job
            self._frames.append(Frame(job.start, job.end - job.start, self._raw_start, self.pos - self._raw_start))
            self._job = None

    def close(self) -> None:
        """Stop the splitter and decoders (their hand-overs give up once stopped) and wait for them."""
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._thread.join()
        self._done = True


# -- after a damaged frame: where the next one begins -------------------------------------------------------------
FRAME_MAGICS = tuple(m.to_bytes(4, "little") for m in (ZSTD_MAGIC, *range(SKIPPABLE_MIN, SKIPPABLE_MAX + 1)))


class DamagedFrame(NamedTuple):
    """A frame that does not decode: where it starts, where the frame after it starts (the file's size at the end),
    and the decoded size its header records."""

    start: int
    end: int
    raw_size: int


def damaged_frame_after(fh: BinaryIO, offset: int, file_size: int) -> DamagedFrame | None:
    """The zstd frame at or after offset (skippable frames stepped over), when it can be passed: its header records
    its decoded size, and the next frame is found where its block headers say it ends or, if they are damaged, at
    the next frame magic. None when it cannot be (no size recorded, or no frame header at all)."""
    start = _zstd_frame_at(fh, offset, file_size)
    if start is None:
        return None
    fh.seek(start)
    try:
        params = zstandard.get_frame_parameters(fh.read(18))
    except zstandard.ZstdError:
        return None
    end = _walked_end(fh, start, file_size)
    if end is None:
        end = _next_magic(fh, start + 4, file_size)
    size = params.content_size
    if size >= zstandard.CONTENTSIZE_ERROR:  # not recorded (pzstd): what it decodes to, its checksum unchecked
        size = _unchecked_size(fh, start, end)
        # damage can change how much it decodes to: the frame after it is taken to start a tar block (as pzstd's
        # and seekable frames do), so that the walk after it finds the headers where they are
        size = None if size is None else size + -size % 512
    return None if size is None else DamagedFrame(start, end, size)


class _Unchecked:
    """A frame's compressed bytes with its checksum flag cleared and the checksum left off: zstd decodes it to
    its end whatever the checksum would say (for its size alone: these bytes are never handed out)."""

    def __init__(self, fh: BinaryIO, start: int, end: int) -> None:
        fh.seek(start)
        head = bytearray(fh.read(5))
        if len(head) == 5 and head[4] & 0x04:
            head[4] &= ~0x04
            end -= 4
        self._head, self._fh, self._left = bytes(head), fh, end - start - len(head)

    def read(self, n: int) -> bytes:
        if self._head:
            data, self._head = self._head, b""
            return data
        data = self._fh.read(min(n, self._left)) if self._left > 0 else b""
        self._left -= len(data)
        return data


def _unchecked_size(fh: BinaryIO, start: int, end: int) -> int | None:
    """How many bytes the frame decodes to with its checksum unchecked; None if it does not decode to its end."""
    dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
    got = 0
    try:
        with dctx.stream_reader(_Unchecked(fh, start, end), read_size=READ_CHUNK, read_across_frames=False) as reader:
            while chunk := reader.read(READ_CHUNK):
                got += len(chunk)
    except zstandard.ZstdError:
        return None
    return got


def _zstd_frame_at(fh: BinaryIO, offset: int, file_size: int) -> int | None:
    while offset + 8 <= file_size:
        fh.seek(offset)
        magic, length = struct.unpack("<II", fh.read(8))
        if magic == ZSTD_MAGIC:
            return offset
        if not SKIPPABLE_MIN <= magic <= SKIPPABLE_MAX:
            return None
        offset += 8 + length
    return None


def _walked_end(fh: BinaryIO, start: int, file_size: int) -> int | None:
    """Where the frame at start ends by its block headers, if a frame (or the file's end) begins there."""
    fh.seek(start)
    source = _FrameSource(fh, start, None)
    try:
        source.next_frame()
        end = source.skip_frame()
    except (ZstdFormatError, IndexError):
        return None
    if end == file_size:
        return end
    fh.seek(end)
    return end if fh.read(4) in FRAME_MAGICS else None


def _next_magic(fh: BinaryIO, offset: int, file_size: int) -> int:
    """The offset of the next frame magic (zstd or skippable) from offset on; the file's size if there is none."""
    tail = b""
    fh.seek(offset)
    at = offset
    while chunk := fh.read(READ_CHUNK):
        data = tail + chunk
        hits = [i for i in (data.find(m) for m in FRAME_MAGICS) if i >= 0]
        if hits:
            return at - len(tail) + min(hits)
        tail, at = data[-3:], at + len(chunk)
    return file_size
