"""Random reads of members, by the catalog's frame table, through a bounded LRU cache of decoded frames.

A read of bytes [a, b) of an archive's decompressed stream decodes only the frames that hold them: each frame is
read by its (comp_offset, comp_size) and decoded alone, and kept in a cache shared by every reader, bounded by
bytes, least recently used first out, so many small members of one frame decode it once. A frame too large for
the cache (a single-frame `zstd -T0` archive without its seekable copy) is read forward by one ArchiveReader per
archive, which re-enters the frame only when a read goes back. Everything is safe for concurrent FUSE threads.

Where the bytes come from is `archive_source`'s decision (the seekable copy when whole, else the original, which
must be as indexed): the same rule as extract and verify. What a read hands out is `VerifiedRanges`'s: only bytes
of pieces that matched the catalog's piece hashes, kept in a cache of verified pieces.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import mmap
import os
import sqlite3
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import zstandard

from cloudvault.archive import sparse
from cloudvault.archive.decoded import SeekPointReader
from cloudvault.archive.reader import MAX_WINDOW, ZIP_LOCAL, ArchiveReader, frame_for_offset
from cloudvault.catalog.flagged import refuses_any
from cloudvault.catalog.lookup import (
    archive_format,
    archive_location,
    file_location,
    file_pieces,
    member_pieces,
    nested_archives,
)
from cloudvault.errors import IntegrityError, StaleArchive, VaultError
from cloudvault.io.members import (
    STREAM_READ,
    PieceCache,
    PieceCheck,
    VerifiedRanges,
    archive_source,
    open_plain,
    outer_member,
    refuse_changed,
)
from cloudvault.models import Frame, Member
from cloudvault.pieces import PIECE
from cloudvault.tools.mirrorfs import open_mirror

DECODE_STEP = 128 << 10  # a frame is decoded on in steps of at least this many bytes (no further than a read needs
# and this: a step of 1 MiB decoded up to 1 MiB past the end of a `cat`, and the first read's second 64 KiB part
# (PieceCheck.spans) waited for 1 MiB more)
MAPPING_STEP = 1 << 20  # a frame's buffer is mapped in multiples of this
KEPT_BUFFERS = 16 << 20  # freed frames' memory kept for the next ones (at most an eighth of the cache)
USUAL_FRAME = 8 << 20  # pzstd's frames at its usual levels: the kept buffers are made this size up front
KEPT_DECODERS = 2  # a frame read and the next one decoded ahead
READ_AHEAD = 1 << 20  # a stream's read (STREAM_READ) has its frame decoded on ahead of it by at most this
KEPT_WINDOW = 16 << 20  # a decoder of a larger frame is let go (its window buffer would stay in memory)


class FrameBuffers:
    """Memory for decoded frames: each its own private anonymous mapping (given back to the system whole, so
    --cache-mb bounds the process's RSS, which a heap's freed blocks would not; a shared mapping's pages are
    shmem, about twice the cost each to fault in), and the last ones freed kept, up to keep bytes, so the next
    frame decodes into pages already faulted in. warm() fills the keep up front, so the mount's first reads find
    it too."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._free: list[mmap.mmap] = []
        self._lock = threading.Lock()

    def take(self, size: int) -> mmap.mmap:
        """A mapping of at least size bytes (a kept one if one fits without wasting half of it)."""
        want = _rounded(size)
        with self._lock:
            fits = [m for m in self._free if want <= len(m) <= 2 * want]
            if fits:
                found = min(fits, key=len)
                self._free.remove(found)
                return found
        return _private_mapping(want)

    def give_back(self, buffer: mmap.mmap) -> None:
        """Kept for the next frame if the keep has room; else dropped (unmapped once nothing views it)."""
        with self._lock:
            if sum(len(m) for m in self._free) + len(buffer) <= self.keep:
                self._free.append(buffer)

    def warm(self, size: int) -> None:
        """Fill the keep with mappings of size bytes, their pages faulted in now, not on the first reads."""
        for _ in range(self.keep // _rounded(size)):
            self.give_back(_private_mapping(_rounded(size), populate=True))


class Decoders:
    """zstd decoders kept for the next frames. A decoder's first frame costs ~1 ms more than its next (its window
    buffer, 8 MiB for pzstd's frames, faulted in page by page as it decodes): a frame takes a kept one, holds it
    while it is decoded in steps, and hands it back once whole or let go; at most keep are kept, each of a frame of
    at most KEPT_WINDOW bytes (its window buffer stays: a larger one would hold its memory)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._free: list[zstandard.ZstdDecompressor] = []
        self._lock = threading.Lock()

    def take(self) -> zstandard.ZstdDecompressor:
        with self._lock:
            if self._free:
                return self._free.pop()
        return zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)

    def give_back(self, held: list, raw_size: int) -> None:
        """The decoder in held (a frame's, emptied: handed back once), kept if there is room and its frame was
        small enough."""
        decoder = held.pop() if held else None
        with self._lock:
            if decoder is not None and raw_size <= KEPT_WINDOW and len(self._free) < self.keep:
                self._free.append(decoder)


DECODERS = Decoders(KEPT_DECODERS)
_WARMED = threading.Event()


def warm_decoder(size: int = USUAL_FRAME) -> None:
    """Decode one frame of size bytes like a member's (Huffman-coded literals, then matches back through the whole
    window) and of a window of size (a decoder keeps its window buffer for the next frame whose window fits) with
    each of the KEPT_DECODERS kept decoders (a member's first byte holds one in its frame, the next member's frame
    another): zstd's first use in this process and their window buffers, faulted in, then cost the mount's start
    (~20 ms), not a first read (~1 ms each)."""
    frame, view = warm_frame(size), memoryview(bytearray(MAPPING_STEP))
    decoders = [[DECODERS.take()] for _ in range(DECODERS.keep)]
    for held in decoders:
        reader = held[0].stream_reader(frame)
        while reader.readinto(view):
            pass
    for held in decoders:
        DECODERS.give_back(held, size)
    _WARMED.set()


def warm_frame(size: int) -> bytes:
    """A zstd frame of size bytes of text-like bytes (random letters, repeated) and a window of size."""
    letters = bytes.maketrans(bytes(range(256)), b"etaoin shrdlucmf" * 16)
    text = os.urandom(MAPPING_STEP).translate(letters)
    window = zstandard.ZstdCompressionParameters.from_level(1, window_log=max(10, size.bit_length() - 1))
    return zstandard.ZstdCompressor(compression_params=window).compress(text * max(1, size // MAPPING_STEP))


def decoder_warmed() -> bool:
    return _WARMED.is_set()


def _rounded(size: int) -> int:
    return max(1, -(-size // MAPPING_STEP)) * MAPPING_STEP


def _private_mapping(size: int, populate: bool = False) -> mmap.mmap:
    """size bytes of private anonymous memory (populate: faulted in now). Not asked for in huge pages: measured
    here, the kernel's compaction for them cost more than the page faults they save (grep -r over pzstd: the
    mount's CPU 0.73-0.77 s without, 1.02-1.03 s with)."""
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    return mmap.mmap(-1, size, flags=flags | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0))


class DecodedFrame:
    """One frame, decoded only as far as its readers have needed so far, straight into one buffer of its raw size
    (no regrowing, no second copy, no zeroing first: a bytearray writes 8 MiB of zeros before the first byte): a
    read near the start of an 8 MiB pzstd frame does not pay for the rest of it, and a later read further on
    decodes on from where the last stopped. Its buffer goes back to buffers once nothing holds the frame."""

    def __init__(self, comp, raw_size: int, buffers: FrameBuffers) -> None:
        """comp: the frame's compressed bytes, a file-like object read forward as the decoding needs them (or
        bytes: _frame_reader)."""
        self.raw_size = raw_size
        buffer = buffers.take(raw_size)
        self._decoder: list = []  # the kept decoder (Decoders) it holds until it is whole or let go
        weakref.finalize(self, _let_go, buffers, buffer, self._decoder, raw_size)  # when evicted and no reader is in it
        self._view = memoryview(buffer)[:raw_size]
        self._first = ctypes.c_char.from_buffer(buffer)
        self.address = ctypes.addressof(self._first)  # where its bytes are, for a read copied straight to FUSE
        self._done = 0
        self._ahead_to = 0  # how far the decode-ahead thread was asked to decode it
        self._reader = _frame_reader(comp, raw_size, self._decoder)
        self._lock = threading.Lock()

    def slice(self, start: int, stop: int) -> bytes:
        return self.view(start, stop).tobytes()

    def view(self, start: int, stop: int) -> memoryview:
        """Bytes [start, stop) where they were decoded (never written again while this frame lives)."""
        if self._done < stop:
            self._decode_to(stop)
        return self._view[start:stop]

    def decode_rest(self) -> None:
        self.decode_on(self.raw_size)

    def decode_on(self, stop: int) -> None:
        """Decode to stop a step at a time (a reader waits for one step at most, then decodes its own part itself);
        a damaged frame is left for its reader to meet."""
        with contextlib.suppress(IntegrityError):
            while self._done < stop:
                self._decode_to(min(stop, self._done + DECODE_STEP))

    def decode_on_ahead(self, stop: int, ahead: ThreadPoolExecutor) -> None:
        """Have the decode-ahead thread decode to stop, unless it was asked already or it is decoded that far."""
        if stop > max(self._done, self._ahead_to):
            self._ahead_to = stop
            ahead.submit(self.decode_on, stop)

    def _decode_to(self, stop: int) -> None:
        with self._lock:
            while self._done < stop:
                want = min(self.raw_size, max(stop, self._done + DECODE_STEP))
                try:
                    got = self._reader.readinto(self._view[self._done : want])
                except zstandard.ZstdError as exc:
                    self._decoder.clear()  # not kept for another frame in whatever state zstd left it
                    raise IntegrityError(detail=f"damaged archive: {exc}") from None
                if not got:
                    raise IntegrityError(detail=f"damaged archive: a frame gave {self._done} bytes, "
                                                f"not {self.raw_size}")  # fmt: skip
                self._done += got
            if self._done >= self.raw_size:
                self._reader = None  # whole: the compressed bytes go, the decoder to the next frame
                DECODERS.give_back(self._decoder, self.raw_size)


def _let_go(buffers: FrameBuffers, buffer: mmap.mmap, decoder: list, raw_size: int) -> None:
    buffers.give_back(buffer)
    DECODERS.give_back(decoder, raw_size)


def _frame_reader(comp, raw_size: int, held: list):
    """What decodes one frame, with readinto: zstd's reader over a .tar.zst frame (a file-like object read forward,
    or bytes) by a kept decoder (put in held), or, for a zip member's local record (bytes: archive/zip.py), its own
    method's."""
    if isinstance(comp, bytes):
        if comp[:4] == ZIP_LOCAL:
            from cloudvault.archive.zip import RecordReader  # here: a .tar.zst mount never needs it

            return RecordReader(comp, raw_size)
        comp = io.BytesIO(comp)
    held.append(DECODERS.take())
    return held[0].stream_reader(comp)


class _FrameBytes:
    """One frame's compressed bytes in the archive file, read forward by pread (no shared file position)."""

    def __init__(self, fd: int, frame: Frame) -> None:
        self._fd, self._at, self._left = fd, frame.comp_offset, frame.comp_size

    def read(self, size: int = -1) -> bytes:
        size = self._left if size < 0 else min(size, self._left)
        data = os.pread(self._fd, size, self._at) if size else b""
        self._at += len(data)
        self._left -= len(data)
        return data


class FrameCache:
    """Decoded frames by (file id, frame index), at most limit bytes of them (each counted at its full size, and
    the buffers kept for the next ones within it), least recently used out first; a frame is made once however
    many readers want it at the same time."""

    def __init__(self, limit: int) -> None:
        self.buffers = FrameBuffers(min(KEPT_BUFFERS, limit // 8))
        self.limit = limit - self.buffers.keep
        self.used = 0
        self.decodes = 0
        self._frames: OrderedDict[tuple[int, int], DecodedFrame] = OrderedDict()
        self._lock = threading.Lock()
        self._busy: dict[tuple[int, int], threading.Lock] = {}

    def fits(self, frame: Frame) -> bool:
        return frame.raw_size <= self.limit // 2

    def __contains__(self, key: tuple[int, int]) -> bool:
        with self._lock:
            return key in self._frames or key in self._busy

    def held(self, key: tuple[int, int]) -> DecodedFrame | None:
        """The frame at key if it is cached (its place in the eviction order kept)."""
        with self._lock:
            return self._frames.get(key)

    def get(self, key: tuple[int, int], make: Callable[[], DecodedFrame]) -> DecodedFrame:
        with self._lock:
            found = self._frames.get(key)
            if found is not None:
                self._frames.move_to_end(key)
                return found
            busy = self._busy.setdefault(key, threading.Lock())
        with busy:  # a second reader of the same frame waits for the first one's read of it
            with self._lock:
                found = self._frames.get(key)
            if found is None:
                found = make()
                self._put(key, found)
        with self._lock:
            self._busy.pop(key, None)
        return found

    def _put(self, key: tuple[int, int], frame: DecodedFrame) -> None:
        with self._lock:
            self.decodes += 1
            self._frames[key] = frame
            self.used += frame.raw_size
            while self.used > self.limit and self._frames:
                _, old = self._frames.popitem(last=False)
                self.used -= old.raw_size


class ArchiveBytes:
    """The decompressed stream of one archive, read at any offset. A read in the second half of a frame, by a
    reader that will go on into the next frame (`until`: where its member ends), has that frame decoded ahead in
    the background: `cat` or `grep -r` of a member spanning frames finds it decoded while this one's pieces are
    hashed and handed out. A member ending in this frame has nothing decoded ahead (it would only compete)."""

    def __init__(self, file_id: int, opener: Callable, frames: list[Frame], cache: FrameCache,
                 ahead: ThreadPoolExecutor | None = None, records: bool = False) -> None:  # fmt: skip
        """records: a zip, whose frames are its members' local records (each read whole, then decoded)."""
        self.file_id = file_id
        self._records = records
        self._ahead = ahead
        self._ahead_index = -1  # the frame last decoded ahead
        self._opener = opener
        self._frames = frames
        self._index = {f.raw_offset: i for i, f in enumerate(frames)}
        self._cache = cache
        self._fh = opener()
        self._fh_lock = threading.Lock()
        self._forward: ArchiveReader | None = None  # for frames too large to cache
        self._forward_lock = threading.Lock()

    def read(self, offset: int, size: int, until: int = 0) -> bytes:
        out = []
        for frame, index, at, stop in self._frames_over(offset, offset + size):
            if self._cache.fits(frame):
                decoded = self._cached(frame, index, stop, until)
                out.append(decoded.slice(at - frame.raw_offset, stop - frame.raw_offset))
            else:
                out.append(self._read_forward(at, stop - at))
        return b"".join(out)

    def spans(self, offset: int, size: int, until: int = 0) -> list[tuple[DecodedFrame, int, int]] | None:
        """Where bytes [offset, offset + size) are in the cached frames that hold them, decoded that far: (frame,
        start in it, length) for each frame; None when one of those frames is too large to cache (read() then)."""
        out = []
        for frame, index, at, stop in self._frames_over(offset, offset + size):
            if not self._cache.fits(frame):
                return None
            decoded = self._cached(frame, index, stop, until)
            decoded.view(at - frame.raw_offset, stop - frame.raw_offset)
            out.append((decoded, at - frame.raw_offset, stop - at))
        return out

    def _frames_over(self, offset: int, end: int) -> Iterator[tuple[Frame, int, int, int]]:
        """(frame, its index, from, to) for each frame that bytes [offset, end) lie in; IntegrityError where the
        archive ends before end."""
        while offset < end:
            frame = frame_for_offset(self._frames, offset)
            if frame.raw_offset + frame.raw_size <= offset:
                raise IntegrityError(detail="the archive ends before the member's end")
            stop = min(end, frame.raw_offset + frame.raw_size)
            yield frame, self._index[frame.raw_offset], offset, stop
            offset = stop

    def _cached(self, frame: Frame, index: int, stop: int, until: int) -> DecodedFrame:
        """The frame from the cache (loaded if it is not there); a reader going on past it (until) has the next
        frame decoded ahead once it reads (to stop) in this one's second half."""
        decoded = self._cache.get((self.file_id, index), lambda: self._load(frame))
        if until > frame.raw_offset + frame.raw_size and 2 * (stop - frame.raw_offset) > frame.raw_size:
            self._decode_ahead(index + 1)
        return decoded

    def decode_on(self, offset: int, stop: int) -> None:
        """Have the cached frame that holds offset (one being read: none is loaded for this) decoded on to stop, or
        to its end, by the decode-ahead thread."""
        frame = frame_for_offset(self._frames, offset)
        frame_end = frame.raw_offset + frame.raw_size
        if self._ahead is None or offset >= frame_end or not self._cache.fits(frame):
            return
        decoded = self._cache.held((self.file_id, self._index[frame.raw_offset]))
        if decoded is not None:
            decoded.decode_on_ahead(min(stop, frame_end) - frame.raw_offset, self._ahead)

    def _decode_ahead(self, index: int) -> None:
        if self._ahead is None or index >= len(self._frames) or index == self._ahead_index:
            return
        frame, key = self._frames[index], (self.file_id, index)
        if not self._cache.fits(frame) or key in self._cache:
            return
        self._ahead_index = index
        self._ahead.submit(self._decoded_ahead, key, frame)

    def _decoded_ahead(self, key: tuple[int, int], frame: Frame) -> None:
        with contextlib.suppress(VaultError, OSError):  # what went wrong, the frame's own reader meets again
            self._cache.get(key, lambda: self._load(frame)).decode_rest()

    def _load(self, frame: Frame) -> DecodedFrame:
        """The frame, to be decoded as far as asked: its compressed bytes read by the decoder as it goes when the
        archive is a local file (the first byte of a member 1 MiB into an 8 MiB frame reads a quarter of it)."""
        if not self._records:
            try:
                return DecodedFrame(_FrameBytes(self._fh.fileno(), frame), frame.raw_size, self._cache.buffers)
            except (AttributeError, OSError, ValueError):  # a remote mirror's file: no descriptor to pread
                pass
        with self._fh_lock:
            self._fh.seek(frame.comp_offset)
            comp = self._fh.read(frame.comp_size)
        return DecodedFrame(comp, frame.raw_size, self._cache.buffers)

    def _read_forward(self, offset: int, size: int) -> bytes:
        with self._forward_lock:
            if self._forward is None:
                if self._records:
                    from cloudvault.archive.zip import ZipReader  # here: a .tar.zst mount never needs it

                    self._forward = ZipReader(self._opener(), self._frames)
                else:
                    self._forward = ArchiveReader(self._opener, self._frames)
            return b"".join(bytes(c) for c in self._forward.chunks(offset, size))

    def close(self) -> None:
        self._fh.close()
        if self._forward is not None:
            self._forward.close()


class FramePiece:
    """A piece that verified where its frames decoded it, read from there while they live: each frame is held
    weakly (the frame cache decides when it goes, and its memory then decodes other frames), so a piece whose
    frame is gone is read and checked again."""

    __slots__ = ("spans", "size")

    def __init__(self, spans: list[tuple[DecodedFrame, int, int]]) -> None:
        self.spans = [(weakref.ref(frame), start, n) for frame, start, n in spans]
        self.size = sum(n for _, _, n in spans)

    def __len__(self) -> int:
        return self.size

    def held(self) -> list[tuple[DecodedFrame, int, int]] | None:
        """(frame, address, length) of each part, the frames held; None if one of them is gone."""
        out = []
        for ref, start, n in self.spans:
            frame = ref()
            if frame is None:
                return None
            out.append((frame, frame.address + start, n))
        return out


class FrameRanges(VerifiedRanges):
    """VerifiedRanges of a member of an archive read by cached frames: each piece (or part: PieceCheck.spans) is
    checked where its frames decoded it and handed out from there, parts(offset, size) giving (holder, address,
    length) for one copy straight into libfuse's buffer; a piece in a frame too large to cache is read and kept as
    bytes (VerifiedRanges's way). A stream's read (STREAM_READ or more) has the rest of the member in its frame
    decoded on ahead, READ_AHEAD at most, by the decode-ahead thread while its own pieces are hashed and handed out
    (`cat` then finds its next reads decoded: the second core decodes while the first checks)."""

    def __init__(self, key: tuple, read_raw: Callable[[int, int], bytes], check: PieceCheck, cache: PieceCache,
                 archive: ArchiveBytes, start: int) -> None:  # fmt: skip
        super().__init__(key, read_raw, check, cache)
        self._archive, self._start, self._end = archive, start, start + check.size

    def __call__(self, offset: int, size: int) -> bytes:
        return b"".join(ctypes.string_at(address, n) for _, address, n in self.parts(offset, size))

    def parts(self, offset: int, size: int) -> list[tuple[object, int, int]]:
        """Where bytes [offset, offset + size) are, each part from a piece that verified, with what holds that
        memory (a part's address is good while its holder is)."""
        end = min(offset + size, self.check.size)
        if end <= offset:
            return []
        if self.check.whole is None or not self.check.by_piece:
            data = super().__call__(offset, size)
            return [(data, bytes_address(data), len(data))]
        out = []
        for at, span in self._spans(offset, end, size):
            lo, hi = max(offset, at) - at, min(end, at + span) - at
            for holder, address, n in self._held_span(at, span):  # the span's parts, [lo, hi) of them kept
                if lo < n and hi > 0:
                    out.append((holder, address + max(lo, 0), min(hi, n) - max(lo, 0)))
                lo, hi = lo - n, hi - n
        if size >= STREAM_READ and end < self.check.size:  # a stream's read: its next bytes decoded meanwhile
            self._archive.decode_on(self._start + end, self._start + min(self.check.size, end + READ_AHEAD))
        return out

    def _held_span(self, start: int, size: int) -> list[tuple[object, int, int]]:
        key = (*self.key, start, size)
        while True:
            piece = self._cache.get_or_make(key, lambda: self._checked_in_place(start, size))
            if type(piece) is not FramePiece:
                return [(piece, bytes_address(piece), len(piece))]
            held = piece.held()
            if held is not None:
                return held
            self._cache.drop(key, piece)  # a frame of it was let go: that memory may hold another frame now

    def _checked_in_place(self, start: int, size: int):
        spans = self._archive.spans(self._start + start, size, self._end)
        if spans is None:
            return self._verified_span(start, size)
        h = self.check.span_hasher(start, size)
        for frame, at, n in spans:
            h.update(frame.view(at, at + n))
        self.check.verify_span(start, size, h)
        return FramePiece(spans)


def bytes_address(data: bytes) -> int:
    """Where a bytes object's bytes are (good while it lives)."""
    return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0


class Sources:
    """Byte ranges of any Member (plain file or archive member), the archives opened once and kept.

    conn is used under a lock (one catalog connection for every FUSE thread); each read first checks that the
    archive or file is still as indexed (StaleArchive otherwise), a stat of the mirror, never a read of it.
    """

    def __init__(self, conn: sqlite3.Connection, cache: FrameCache, lock: threading.Lock | None = None,
                 pieces: PieceCache | None = None) -> None:  # fmt: skip
        self.conn = conn
        self.cache = cache
        self.pieces = pieces or PieceCache()
        self._lock = lock or threading.Lock()  # the lock of every use of conn (the tree's, when it shares conn)
        self._archives: dict[int, ArchiveBytes] = {}
        self._ahead = ThreadPoolExecutor(1, thread_name_prefix="vault-decode-ahead")
        self._where: dict[int, tuple] = {}  # file id -> _location's answer, and whether flags refuse any of it

    def check(self, member: Member) -> None:
        """StaleArchive if the archive (or plain file) holding member changed since it was indexed."""
        with self._lock:
            where = self._where.get(member.file_id)
            if where is None:
                where = self._where[member.file_id] = (*self._location(member), refuses_any(self.conn, member.file_id))
            if where[-1]:
                refuse_changed(self.conn, member, member)
        root, path, raw, size, mtime_ns, _ = where
        now = open_mirror(root).stat(path, raw)
        if now is not None and now != (size, mtime_ns):
            what = f"size {size} -> {now[0]}" if now[0] != size else "mtime changed"
            raise StaleArchive(path=path, what=what, entry=member.entry_id)

    def _location(self, member: Member) -> tuple:
        """(mirror root, path, raw path, size, mtime_ns) of the archive or plain file holding member, as indexed."""
        if member.archive is None:
            return tuple(file_location(self.conn, member.file_id))
        loc = archive_location(self.conn, member.file_id)
        return loc.root, loc.path, loc.raw_path, loc.size, loc.mtime_ns

    def reader(self, member: Member) -> VerifiedRanges:
        """read(offset, size) over member's data (a sparse member's expanded bytes, holes as zeros), every byte of
        it from a piece that verified."""
        key = (member.file_id, member.data_offset, member.path)
        size = member.size if member.sparse_map is None else sparse.expanded_size(sparse.decode_map(member.sparse_map))
        check = PieceCheck(member.label, size, member.blake3, self._hashes_of(member))
        raw = self._raw_reader(member)
        archive = self._archives.get(member.file_id) if member.archive is not None else None
        if type(archive) is ArchiveBytes and member.sparse_map is None:
            return FrameRanges(key, raw, check, self.pieces, archive, member.data_offset)
        return VerifiedRanges(key, raw, check, self.pieces)

    def _hashes_of(self, member: Member) -> bytes | None:
        if member.archive is not None and member.sparse_map is None and member.size <= PIECE:
            return None  # one piece: its hash is the member's own (the catalog keeps no piece hashes for it)
        with self._lock:
            if member.archive is None:
                return file_pieces(self.conn, member.file_id)
            return member_pieces(self.conn, member.file_id, member.data_offset, member.path)

    def _raw_reader(self, member: Member) -> Callable[[int, int], bytes]:
        """read(offset, size) of member's bytes as the mirror has them now: not verified."""
        if member.archive is None:
            return self._plain(member)
        archive = self._archive(member.file_id)
        if member.sparse_map is None:
            end = member.data_offset + member.size
            return lambda off, n: archive.read(member.data_offset + off, max(0, min(n, member.size - off)), end)
        pieces = sparse.decode_map(member.sparse_map)
        return lambda off, n: _sparse_read(archive, member, pieces, off, n)

    def _archive(self, file_id: int) -> ArchiveBytes:
        with self._lock:
            archive = self._archives.get(file_id)
            if archive is None:
                opener, frames = archive_source(self.conn, file_id)
                fmt, points = archive_format(self.conn, file_id)
                if fmt in ("tar.zst", "zip"):
                    archive = ArchiveBytes(file_id, opener, frames, self.cache, self._ahead,
                                           records=fmt == "zip")  # fmt: skip
                else:  # gzip, bzip2, xz, plain tar: from the seek point before each read
                    archive = SeekPointReader(opener, fmt, points)
                nested = nested_archives(self.conn, file_id)
                if nested:  # archives it holds as members, decoded from their verified bytes (archive/nested.py)
                    from cloudvault.archive.nested import NestedSpace

                    label = archive_location(self.conn, file_id).path.rsplit("/", 1)[-1]
                    archive = NestedSpace(archive, nested, partial(self._outer_pieces, file_id), label)
                self._archives[file_id] = archive
            return archive

    def _outer_pieces(self, file_id: int, nested) -> Iterator[bytes]:
        """The bytes of the member a nested archive is, a verified piece at a time (kept in the piece cache)."""
        with self._lock:
            member, check = outer_member(self.conn, file_id, nested)
        read = VerifiedRanges((file_id, member.data_offset, member.path), self._raw_reader(member), check, self.pieces)
        for offset in range(0, member.size, PIECE):
            yield read(offset, PIECE)

    def _plain(self, member: Member) -> Callable[[int, int], bytes]:
        with self._lock:
            root, path, raw, _, _ = file_location(self.conn, member.file_id)
        fh = open_plain(root, path, raw)
        if hasattr(fh, "fileno"):
            fd = fh.fileno()
            return _Plain(fh, lambda off, n: os.pread(fd, n, off))
        lock = threading.Lock()

        def read(off: int, n: int) -> bytes:
            with lock:
                fh.seek(off)
                return fh.read(n)

        return _Plain(fh, read)

    def close(self) -> None:
        self._ahead.shutdown(wait=True, cancel_futures=True)
        for archive in self._archives.values():
            archive.close()
        self._archives.clear()


class _Plain:
    """A plain file's reads; closing it closes the file."""

    def __init__(self, fh, read: Callable[[int, int], bytes]) -> None:
        self._fh, self._read = fh, read

    def __call__(self, off: int, n: int) -> bytes:
        return self._read(off, n)

    def close(self) -> None:
        self._fh.close()


def _sparse_read(archive: ArchiveBytes, member: Member, pieces: list, off: int, n: int) -> bytes:
    """Bytes [off, off+n) of a sparse member: the stored pieces where the map has them, zeros between."""
    end = min(off + n, sparse.expanded_size(pieces))  # it ends where its map ends (sparse.expand)
    out = bytearray(max(0, end - off))
    stored = 0
    for start, length in pieces:
        lo, hi = max(off, start), min(end, start + length)
        if lo < hi:
            out[lo - off : hi - off] = archive.read(member.data_offset + stored + (lo - start), hi - lo)
        stored += length
    return bytes(out)
