"""Tar archives compressed as one stream (gzip, bzip2, xz) or not at all: decoded in order while seek points are
made, and entered again later at the seek point before a member, so one member costs a decode near it only.

gzip and bzip2 go through rapidgzip and indexed_bzip2 (the `formats` extra) when they are installed: they decode
and record the seek points (gzip: a 32 KiB window every 16 MiB of compressed bytes; bzip2: where each block starts)
in the same pass, kept in the catalog (seek_points).
An xz archive's blocks are in its own index (python-xz reads it); a plain tar is read where it lies. When a fast
decoder fails, the rest is decoded by Python's own module (zlib, bz2, lzma) from the start, the bytes already
handed out skipped, so the damage is named as that module meets it (truncated, bad_crc, corrupt_stream) and every
byte before it is kept. Without the extra, the same modules read everything, in order, without seek points.
"""

from __future__ import annotations

import bz2
import io
import json
import lzma
import threading
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

from cloudvault.archive.zstdframes import ThreadedFrameStream, ZstdFormatError
from cloudvault.errors import IntegrityError

CHUNK = 1 << 20
EXTRA = "formats"  # pip install 'cloudvault[formats]'
# compressed bytes between two gzip seek points: 4 MiB (rapidgzip's default) made a 2 GB archive's index 17 MB, whose
# import alone took 0.2 s; at 16 MiB it is 4 MB (50 ms) and a read decodes at most 16 MiB (about 40 ms) to its start
GZIP_SPACING = 16 << 20
FAST = {"tar.gz": "rapidgzip", "tar.bz2": "indexed_bzip2"}  # the optional module each format's seek points need


class DecodeError(ZstdFormatError):
    """The compressed stream is damaged or ends early. kind: truncated | bad_crc | corrupt_stream."""


def missing_library(fmt: str) -> str | None:
    """The one line saying what to install for random access into fmt, or None when it is there."""
    module = FAST.get(fmt)
    if module is None:
        return None
    try:
        __import__(module)
    except ImportError:
        how = f"pip install 'cloudvault[{EXTRA}]'"
        return f"{fmt} members are read from the archive's start: install the {EXTRA} extra ({how})"
    return None


class _HashedSource(io.RawIOBase):
    """The compressed file as a decoder reads it, in whatever order: each byte is handed to on_compressed once, in
    file order, as soon as the bytes before it have been (finish() reads what no decoder did)."""

    def __init__(self, fh: BinaryIO, on_compressed: Callable[[bytes], object] | None) -> None:
        super().__init__()
        self._fh, self._on = fh, on_compressed
        self._pos = fh.seek(0)
        self.hashed = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = self._fh.seek(offset, whence)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        at, data = self._pos, self._fh.read(n)
        self._pos = at + len(data)
        if at <= self.hashed < self._pos:
            if self._on:
                self._on(data[self.hashed - at :] if at < self.hashed else data)
            self.hashed = self._pos
        return data

    def readinto(self, buf) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    @property
    def file(self) -> BinaryIO:
        return self._fh

    def tail(self, n: int) -> bytes:
        """The file's last n bytes (after finish(): every byte has been hashed)."""
        self._fh.seek(max(0, self.hashed - n))
        return self._fh.read(n)

    def restarted(self) -> _HashedSource:
        """The same file from its start, for a second decoder (the bytes are not handed over twice)."""
        self.seek(0)
        return self

    def finish(self) -> None:
        self._fh.seek(self.hashed)
        self._pos = self.hashed
        while self.read(CHUNK):
            pass


class Careful:
    """The decompressed stream by Python's own module, in order, from the file's start: read(n) gives up to n
    bytes (b'' at the clean end) and raises DecodeError where the stream is damaged or cut short. Streams one
    after another (pigz's and bgzip's members, pbzip2's streams) are read as one; zeros after the last are padding."""

    def __init__(self, fmt: str, source) -> None:
        self._fmt, self._source = fmt, source
        self._file = getattr(source, "file", source)  # the file itself, for a second look at damage
        self._decoder = None
        self._fed = False  # the current stream has had bytes: a file ending now ends it early
        self._after_stream = False  # a whole stream ended before this one
        self._stream_out = 0  # bytes the current stream gave
        self._out = b""
        self._comp = 0  # compressed bytes read
        self._eof = False

    def read(self, n: int) -> bytes:
        if self._fmt == "tar":
            return self._source.read(n)
        while not self._out and not self._eof:
            self._out = self._decode_some()
        data, self._out = self._out[:n], self._out[n:]
        return data

    def _decode_some(self) -> bytes:
        d = self._decoder
        if d is None:
            d = self._decoder = _new_decoder(self._fmt)
            self._fed, self._stream_out = False, 0
        pending = d.unconsumed_tail if self._fmt == "tar.gz" else b""
        data = pending if pending or (self._fmt != "tar.gz" and not d.needs_input) else self._source.read(CHUNK)
        if data is not pending:
            self._comp += len(data)
        if not data and (self._fmt == "tar.gz" or d.needs_input):
            if self._fed:
                raise DecodeError("truncated", self._comp, f"{self._fmt[4:]} stream cut short")
            self._eof = True
            return b""
        if not self._fed and not data.strip(b"\x00"):
            return b""  # zeros between or after streams (a tape's padding): no stream starts in them
        self._fed = True
        try:
            out = d.decompress(data, CHUNK)
        except (zlib.error, OSError, lzma.LZMAError, EOFError, ValueError) as exc:
            if self._after_stream and not self._stream_out:  # a next stream that is none: bytes appended
                raise DecodeError("corrupt_stream", self._comp, f"bytes after the last {self._fmt[4:]} stream are "
                                  f"not {self._fmt[4:]} ({exc})") from None  # fmt: skip
            kind = _damage_kind(self._fmt, str(exc))
            if self._fmt == "tar.xz" and xz_checks_fail_alone(self._file):
                kind = "bad_crc"  # every block's data decodes whole: what failed is a block's check
            raise DecodeError(kind, self._comp, f"{self._fmt[4:]}: {exc}") from None
        self._stream_out += len(out)
        if d.eof:
            self._decoder = None  # the next member or stream starts afresh
            self._after_stream = True
            rest = d.unused_data
            if rest:
                self._source = _Prefixed(rest, self._source)
                self._comp -= len(rest)
        return out

    def close(self) -> None:
        pass


def _new_decoder(fmt: str):
    if fmt == "tar.gz":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if fmt == "tar.bz2":
        return bz2.BZ2Decompressor()
    return lzma.LZMADecompressor(lzma.FORMAT_XZ)


def _vli(data: bytes, at: int) -> tuple[int, int]:
    """An xz variable-length integer at data[at:]: (value, offset after it)."""
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def _xz_blocks(fh) -> list[tuple[int, int, int]]:
    """(offset, unpadded size, uncompressed size) of each block of a one-stream xz file, from its index."""
    end = fh.seek(0, 2)
    fh.seek(end - 12)
    footer = fh.read(12)
    if len(footer) != 12 or footer[10:] != b"YZ":
        raise ValueError("no xz stream footer")
    index_size = (int.from_bytes(footer[4:8], "little") + 1) * 4
    fh.seek(end - 12 - index_size)
    index = fh.read(index_size)
    count, at = _vli(index, 1)
    blocks, offset = [], 12
    for _ in range(count):
        unpadded, at = _vli(index, at)
        raw, at = _vli(index, at)
        blocks.append((offset, unpadded, raw))
        offset += (unpadded + 3) // 4 * 4
    return blocks


CHECK_SIZES = {0: 0, 1: 4, 4: 8, 10: 32}
ONE_BLOCK = ("one xz block: no seek point inside it, so each member is decoded from the archive's start; "
             "`xz -T0` or `xz --block-size=16MiB` makes it seekable")  # fmt: skip


def one_xz_block(fh: BinaryIO) -> bool:
    """Whether an xz file is one stream of one block, as its index says (plain `xz`, `tar -J` on one thread): the
    format keeps no restart point inside a block. False when it has several blocks or streams (each is entered
    where it starts), or its index cannot be read."""
    try:
        end = fh.seek(0, 2)
        blocks = _xz_blocks(fh)
        fh.seek(end - 12)
        index_size = (int.from_bytes(fh.read(12)[4:8], "little") + 1) * 4
    except (ValueError, IndexError, OSError):
        return False
    if len(blocks) != 1:
        return False
    offset, unpadded, _ = blocks[0]
    return offset + (unpadded + 3) // 4 * 4 + index_size + 12 == end  # else streams before this one


def xz_checks_fail_alone(fh: BinaryIO) -> bool:
    """Whether an xz file that failed to decode has blocks whose data all decode whole (raw, the checks not
    looked at): then the failure was a block's check, a bad CRC. False when it cannot be told (cut short, several
    streams, damaged headers). The file is left where it was."""
    saved = fh.tell()
    try:
        fh.seek(0)
        check = CHECK_SIZES.get(fh.read(12)[7] & 0x0F, 0)
        return all(_raw_block_size(fh, offset, unpadded - check) == raw for offset, unpadded, raw in _xz_blocks(fh))
    except (ValueError, IndexError, lzma.LZMAError, OSError, EOFError):
        return False
    finally:
        fh.seek(saved)


def _raw_block_size(fh: BinaryIO, offset: int, size: int) -> int:
    """The bytes one xz block's data decodes to, decoded raw (its check not looked at) a piece at a time."""
    fh.seek(offset)
    header = fh.read(1)
    header += fh.read((header[0] + 1) * 4 - 1)
    at = _skip_sizes(header, 2, header[1])
    filters = []
    for _ in range((header[1] & 0x03) + 1):
        fid, at = _vli(header, at)
        props, at = _vli(header, at)
        filters.append(lzma._decode_filter_properties(fid, header[at : at + props]))
        at += props
    decoder, left, out = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=filters), size - len(header), 0
    while not decoder.eof:
        data = fh.read(min(CHUNK, left)) if decoder.needs_input else b""
        if decoder.needs_input and not data:
            break
        left -= len(data)
        out += len(decoder.decompress(data, CHUNK))
    return out


def _skip_sizes(block: bytes, at: int, flags: int) -> int:
    """Past a block header's optional compressed and uncompressed sizes."""
    for present in (flags & 0x40, flags & 0x80):
        if present:
            _, at = _vli(block, at)
    return at


class _Prefixed:
    """Bytes already read, served again before the rest of a source."""

    def __init__(self, head: bytes, source) -> None:
        self._head, self._source = head, source

    def read(self, n: int) -> bytes:
        if self._head:
            data, self._head = self._head[:n], self._head[n:]
            return data
        return self._source.read(n)


def _damage_kind(fmt: str, message: str) -> str:
    """bad_crc when the module says a checksum failed (gzip's CRC32; bz2 and xz only say the data is corrupt)."""
    lower = message.lower()
    return "bad_crc" if "crc" in lower or "incorrect data check" in lower else "corrupt_stream"


BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


def _gzip_ends(tail: bytes, decoded: int) -> bool:
    """Whether a gzip file whose fast decoding gave `decoded` bytes ends as a whole stream does: its last trailer's
    size (ISIZE) is the bytes decoded (one member, as tar -z and pigz write), or it ends with bgzip's EOF block.
    Anything else (a cut, members concatenated) is decoded again by zlib, which knows."""
    return tail.endswith(BGZF_EOF[-16:]) or (len(tail) >= 4 and int.from_bytes(tail[-4:], "little") == decoded % 2**32)


BZIP2_EOS = 0x177245385090  # a bzip2 stream's end-of-stream magic, then its 32-bit CRC, then up to 7 padding bits


def _bzip2_ends(tail: bytes) -> bool:
    """Whether a bzip2 file ends with a stream's end marker (its combined CRC and padding after it)."""
    bits = int.from_bytes(tail[-11:], "big")
    return any((bits >> (pad + 32)) & (2**48 - 1) == BZIP2_EOS for pad in range(8))


def _fast_decoder(fmt: str, source, threads: int):
    """rapidgzip's or indexed_bzip2's file over source (they make seek points as they go), or None."""
    try:
        if fmt == "tar.gz":
            import rapidgzip

            return rapidgzip.RapidgzipFile(source, parallelization=threads, chunk_size=GZIP_SPACING)
        if fmt == "tar.bz2":
            import indexed_bzip2

            return indexed_bzip2.IndexedBzip2File(source, parallelization=threads)
    except ImportError:
        return None
    return None


FAST_ERRORS = (ValueError, RuntimeError, OSError, EOFError)


class DecodedStream:
    """One archive's decompressed bytes in order (FrameStream's reading interface, for ThreadedFrameStream's
    thread), its compressed bytes handed to on_compressed once each; at the end, seek_points holds (kind, data)
    for the catalog, or None (xz, plain tar, no fast decoder, damage)."""

    def __init__(self, fh: BinaryIO, fmt: str, *, on_compressed=None, on_raw=None, threads: int = 1) -> None:
        self._fmt = fmt
        self._source = _HashedSource(fh, on_compressed)
        self._on_raw = on_raw
        self._fast = _fast_decoder(fmt, self._source, max(1, threads))
        self._careful: Careful | None = None if self._fast else Careful(fmt, self._source)
        self._fast_error = ""
        self._ended = False
        self.frames: list = []  # zstd's: none here
        self.seek_points: tuple[str, bytes] | None = None
        self.pos = 0

    def _read_some(self, n: int, into: memoryview | None = None) -> int | bytes:
        if n <= 0 or self._ended:
            return 0 if into is not None else b""
        buf = into[:n] if into is not None else memoryview(bytearray(n))
        got = self._decode_into(buf)
        if self._on_raw and got:
            self._on_raw(bytes(buf[:got]))
        self.pos += got
        return got if into is not None else bytes(buf[:got])

    def _decode_into(self, buf: memoryview) -> int:
        """Decoded bytes straight into buf (the thread's ring buffer: no allocation, no copy); 0 at the end."""
        if self._fast is not None:
            try:
                got = self._fast.readinto(buf)
            except FAST_ERRORS as exc:  # named by the careful decoder, which keeps every byte before the damage
                self._fast_error = str(exc)
                self._fall_back()
            else:
                if got or self._end_fast():
                    return got
                self._fall_back()  # an end the fast decoder took for one (a file cut short): Python's module judges
        try:
            data = self._careful.read(len(buf))
        except DecodeError as exc:
            if exc.kind == "corrupt_stream" and "crc" in self._fast_error.lower():
                exc.kind = "bad_crc"  # bz2 says only "invalid data stream"; indexed_bzip2 names the CRC
            self._close_fast()
            raise
        if not data:
            self._ended = True
            self._source.finish()
        buf[: len(data)] = data
        return len(data)

    def _fall_back(self) -> None:
        """Decode again from the start with Python's module, skipping the bytes already handed out."""
        self._close_fast()
        self._careful = Careful(self._fmt, self._source.restarted())
        left = self.pos
        while left:
            got = len(self._careful.read(min(left, CHUNK)))
            if not got:
                raise DecodeError("truncated", 0, f"{self._fmt[4:]} stream ends before the bytes already read")
            left -= got

    def _end_fast(self) -> bool:
        """At the fast decoder's end: True (the seek points it made kept, the compressed bytes it did not read
        hashed) when the file's last bytes end a stream as they should; False (nothing kept) when they may not."""
        self._source.finish()
        tail = self._source.tail(16)
        try:
            if self._fmt == "tar.gz" and _gzip_ends(tail, self.pos):
                if self._source.hashed > GZIP_SPACING:  # a smaller one is decoded from its start: no 32 KiB to keep
                    out = io.BytesIO()
                    self._fast.export_index(out)
                    self.seek_points = ("gzip", out.getvalue())
            elif self._fmt == "tar.bz2" and _bzip2_ends(tail):
                offsets = sorted(self._fast.block_offsets().items())
                self.seek_points = ("bzip2", json.dumps(offsets).encode())
            else:
                return False
        except FAST_ERRORS as exc:  # a fast decoder that cannot say where its seek points are: not trusted
            self._fast_error = str(exc)
            return False
        self._ended = True
        self._close_fast()
        return True

    def _close_fast(self) -> None:
        if self._fast is not None:
            fast, self._fast = self._fast, None
            fast.close()

    def close(self) -> None:
        self._close_fast()


class ThreadedDecodedStream(ThreadedFrameStream):
    """A DecodedStream decoding a step ahead in a thread (rapidgzip, indexed_bzip2, zlib and lzma let go of the
    GIL), read as a ThreadedFrameStream is."""

    def __init__(self, fh: BinaryIO, fmt: str, *, threads: int = 1, **kwargs) -> None:
        import threading

        self._inner = DecodedStream(fh, fmt, threads=threads, **kwargs)
        import queue

        self._queue = queue.Queue()
        self._setup()
        self._thread = threading.Thread(target=self._produce, name=f"{fmt}-decode", daemon=True)
        self._thread.start()

    @property
    def seek_points(self) -> tuple[str, bytes] | None:
        return self._inner.seek_points

    def close(self) -> None:
        super().close()
        self._inner.close()


def _seekable(fmt: str, fh: BinaryIO, seek_points: tuple[str, bytes] | None):
    """A seekable file of the decompressed bytes: entered at the seek point before any offset when the catalog
    has them (gzip, bzip2) or the format carries them (xz blocks), else decoded from the start (forward only)."""
    if fmt == "tar":
        return fh
    try:
        if fmt == "tar.gz" and seek_points and seek_points[0] == "gzip":
            import rapidgzip

            f = rapidgzip.RapidgzipFile(fh, parallelization=1, chunk_size=GZIP_SPACING)
            f.import_index(io.BytesIO(seek_points[1]))
            return f
        if fmt == "tar.bz2" and seek_points and seek_points[0] == "bzip2":
            import indexed_bzip2

            f = indexed_bzip2.IndexedBzip2File(fh, parallelization=1)
            f.set_block_offsets({int(bit): int(raw) for bit, raw in json.loads(seek_points[1])})
            return f
        if fmt == "tar.xz":
            import xz

            return xz.open(fh)
    except ImportError:
        pass
    return _Forward(fmt, fh)


class _Forward:
    """The decompressed bytes from the start, by Python's module: a seek back starts over, a seek ahead skips."""

    def __init__(self, fmt: str, fh: BinaryIO) -> None:
        self._fmt, self._fh = fmt, fh
        self._start()

    def _start(self) -> None:
        self._fh.seek(0)
        self._careful, self._pos = Careful(self._fmt, self._fh), 0

    def seek(self, offset: int) -> None:
        if offset < self._pos:
            self._start()
        while self._pos < offset and (got := len(self._careful.read(min(CHUNK, offset - self._pos)))):
            self._pos += got

    def read(self, n: int) -> bytes:
        data = self._careful.read(n)
        self._pos += len(data)
        return data

    def close(self) -> None:
        pass


class SeekPointReader:
    """Forward reads of one archive's decompressed stream (ArchiveReader's interface), entered at the seek point
    before the first byte wanted; bytes are handed on as decoded, to be verified by the caller (io/members.py)."""

    def __init__(self, opener: Callable[[], BinaryIO], fmt: str, seek_points: tuple[str, bytes] | None,
                 on_data: Callable[[int], None] | None = None) -> None:  # fmt: skip
        self._fh = opener()
        self._file = _seekable(fmt, self._fh, seek_points)
        self._on_data = on_data
        self._pos = -1
        self._lock = threading.Lock()
        self.frames_read = 0
        self.bytes_decompressed = 0

    def chunks(self, offset: int, size: int) -> Iterator[bytes]:
        self.frames_read += 1
        try:
            if offset != self._pos:
                self._file.seek(offset)
            self._pos = offset
            left = size
            while left:
                data = self._file.read(min(CHUNK, left))
                if not data:
                    raise IntegrityError(detail=f"archive ends {left} bytes before the member does")
                self._pos += len(data)
                self.bytes_decompressed += len(data)
                left -= len(data)
                if self._on_data:
                    self._on_data(len(data))
                yield data
        except (DecodeError, *FAST_ERRORS, zlib.error, lzma.LZMAError) as exc:
            self._pos = -1
            raise IntegrityError(detail=f"damaged archive: {exc}; nothing was written") from None

    def read(self, offset: int, size: int, until: int = 0) -> bytes:
        """Bytes [offset, offset + size) at once, from any thread (the mount's reads; until, where the reader's
        member ends, is the zstd reader's hint for decoding ahead: nothing is decoded ahead here)."""
        with self._lock:
            return b"".join(self.chunks(offset, size))

    def close(self) -> None:
        if self._file is not self._fh:
            self._file.close()
        self._fh.close()
