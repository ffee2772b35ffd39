"""Archives inside archives, one level: a member whose bytes are a tar (plain, gzip, bzip2, xz or zstd) is read once
more as an archive, and its members become members of the outer archive with a path through it.

Indexing: a tar member's bytes are kept as the outer archive's walk reads and hashes them (scan.KEEP_NESTED of them
in all; the others, and a zip's, are read again through the outer archive's reader: `MemberFile`, a seekable file
over its bytes), then scanned by an ArchiveScan of its format once the outer walk is over (scan.nest). Its members
come back named `data/x.tgz/src/a.txt` (the path the .conda's inner streams use), their offsets moved to where its
decoded stream is placed in the outer archive's raw space: past the outer's own bytes and the nested archives before
it (a `NestedArchive` row says where). The inner scan hashes the bytes it read; they must be the outer member's
recorded BLAKE3, else the archive changed while it was read (changed_while_indexing: it is read again next run).
What the inner archive holds is not opened again; its damage is flagged on `outer/` (its members' folder); one that
decodes to more than BOMB_RATIO times the outer member's size (and BOMB_FLOOR) is a bomb, refused.

Reading: `NestedSpace` is the outer archive's raw space with the nested archives in it. Bytes of a nested archive
are decoded from its start (no seek points are kept for it: one read per member, forward reads go on), its compressed
bytes being the outer member's, which the caller hands over only in pieces that verified (io/members.py, the mount).
"""

from __future__ import annotations

import bisect
import io
import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

from cloudvault.archive.formats import BOMB_FLOOR, BOMB_RATIO
from cloudvault.errors import CorruptArchive, IntegrityError
from cloudvault.models import NestedArchive

CHUNK = 1 << 20


def through(outer: str, rec, base: int):
    """A member of an inner archive (a scan.MemberRecord) as a member of the outer one: its path through the outer
    member, its offsets moved by base (where the inner archive's decoded bytes start in the outer's raw space)."""
    raw = None if rec.raw_path is None else outer.encode("utf-8", "surrogateescape") + b"/" + rec.raw_path
    return rec._replace(path=f"{outer}/{rec.path}", raw_path=raw, header_offset=base + rec.header_offset,
                        data_offset=base + rec.data_offset)  # fmt: skip


def carry_flags(result, found, outer: str) -> None:
    """The inner archive's flags (found, a scan.ScanResult) as the outer's (result): a member's through the outer
    member, the inner archive's own on `outer/` (its members' folder: the outer member's bytes are whole, and a
    flag on it, a bad_crc, would refuse them as a zip member's)."""
    for flag in found.flags:
        result.flag(flag.kind, flag.detail, f"{outer}/{flag.member or ''}")


def bomb_limit(outer) -> Callable[[bytes], None]:
    """on_raw of an inner scan: the decoding stops (a DecodeError the scan flags) past the limit a zip bomb is
    refused at: BOMB_RATIO times the outer member's size, and BOMB_FLOOR."""
    from cloudvault.archive.decoded import DecodeError

    limit = max(BOMB_FLOOR, BOMB_RATIO * outer.size)
    decoded = [0]

    def count(chunk: bytes) -> None:
        decoded[0] += len(chunk)
        if decoded[0] > limit:
            raise DecodeError("nested_bomb", decoded[0], f"archive bomb refused: it decodes to more than {limit:,} "
                              f"bytes from a {outer.size:,}-byte member (more than {BOMB_RATIO}x and "
                              f"{BOMB_FLOOR >> 30} GiB); its members past that were not read")  # fmt: skip

    return count


class Borrowed:
    """A file handle lent to a reader that closes what it is given: closing this leaves the handle open."""

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh

    def __getattr__(self, name: str):
        return getattr(self._fh, name)

    def close(self) -> None:
        pass


class MemberFile(io.RawIOBase):
    """One member's bytes in an archive's raw space as a seekable file (the inner scan's input): a read where the
    last one stopped goes on; any other enters the reader afresh."""

    def __init__(self, reader, offset: int, size: int) -> None:
        super().__init__()
        self._reader, self._offset, self._size = reader, offset, size
        self._pos = 0
        self._at = -1  # where the open chunk stream is
        self._forward = _Source(iter(()))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = max(0, offset if whence == 0 else (self._pos + offset if whence == 1 else self._size + offset))
        return self._pos

    def read(self, n: int = -1) -> bytes:
        n = self._size - self._pos if n is None or n < 0 else min(n, self._size - self._pos)
        if n <= 0:
            return b""
        if self._at != self._pos:
            self._forward = _Source(self._reader.chunks(self._offset + self._pos, self._size - self._pos))
        data = self._forward.read(n)
        self._pos += len(data)
        self._at = self._pos
        return data

    def readinto(self, buf) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)


# -- the read path ----------------------------------------------------------------------------------------------
class _Source:
    """Verified chunks as the file object a decoder reads forward."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._held = chunks, b""

    def read(self, n: int = -1) -> bytes:
        if not self._held:
            self._held = bytes(next(self._chunks, b""))
        if n is None or n < 0:
            n = len(self._held)
        data, self._held = self._held[:n], self._held[n:]
        return data

    def readinto(self, buf) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)


def _decoder(fmt: str, source: _Source):
    """read(n) of the decoded bytes of an archive in fmt whose compressed bytes source gives."""
    if fmt == "tar":
        return source
    if fmt == "tar.zst":
        import zstandard

        from cloudvault.archive.reader import MAX_WINDOW

        return zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW).stream_reader(source, read_across_frames=True)
    from cloudvault.archive.decoded import Careful

    return Careful(fmt, source)


class _Open:
    """A nested archive being decoded, and where its decoding is."""

    def __init__(self, nested: NestedArchive, chunks: Iterator[bytes]) -> None:
        self.nested, self.pos = nested, 0
        self.read = _decoder(nested.format, _Source(chunks)).read


class NestedSpace:
    """An archive's raw space with its nested archives: offsets before the first are the base reader's; those in a
    nested archive's place are decoded from that archive's start out of outer_bytes(nested), the outer member's
    bytes, which must come verified. A read going on where the last stopped goes on decoding."""

    def __init__(self, base, nested: list[NestedArchive], outer_bytes: Callable[[NestedArchive], Iterator[bytes]],
                 label: str) -> None:  # fmt: skip
        self._base, self._outer_bytes, self._label = base, outer_bytes, label
        self._nested = sorted(nested)
        self._starts = [n.raw_offset for n in self._nested]
        self._open: _Open | None = None
        self._lock = threading.Lock()
        self._decoded = 0

    @property
    def frames_read(self) -> int:
        return self._base.frames_read

    @property
    def bytes_decompressed(self) -> int:
        return self._base.bytes_decompressed + self._decoded

    def chunks(self, offset: int, size: int) -> Iterator[bytes]:
        end = offset + size
        while offset < end:
            i = bisect.bisect_right(self._starts, offset) - 1
            if i < 0:
                stop = min(end, self._starts[0])
                yield from self._base.chunks(offset, stop - offset)
            else:
                nested = self._nested[i]
                stop = min(end, nested.raw_offset + nested.raw_size)
                if stop <= offset:
                    raise IntegrityError(detail=f"{self._label}: offset {offset} lies in no archive it holds")
                yield from self._inner(nested, offset - nested.raw_offset, stop - offset)
            offset = stop

    def read(self, offset: int, size: int, until: int = 0) -> bytes:
        """Bytes [offset, offset + size) at once, from any thread (the mount's reads: a member lies in the outer
        archive's own bytes or in one nested archive, never across)."""
        if offset + size <= self._starts[0]:
            return self._base.read(offset, size, until)
        with self._lock:
            return b"".join(bytes(c) for c in self.chunks(offset, size))

    def _inner(self, nested: NestedArchive, offset: int, size: int) -> Iterator[bytes]:
        if nested.status != "ok":
            raise CorruptArchive(path=f"{self._label} :: {nested.member_path}",
                                 detail=f"flagged {nested.status} when indexed; its members cannot be trusted")
        open_ = self._open
        if open_ is None or open_.nested != nested or open_.pos > offset:
            open_ = self._open = _Open(nested, self._outer_bytes(nested))
        try:
            yield from self._decoded_from(open_, offset, size)
        except IntegrityError:
            self._open = None
            raise
        except Exception as exc:  # a decoder's own error: the bytes verified, so the inner archive is damaged
            self._open = None
            raise IntegrityError(detail=f"{self._label} :: {nested.member_path} does not decode: {exc}") from None

    def _decoded_from(self, open_: _Open, offset: int, size: int) -> Iterator[bytes]:
        while open_.pos < offset:
            got = len(open_.read(min(CHUNK, offset - open_.pos)))
            if not got:
                raise IntegrityError(detail=f"{open_.nested.member_path} ends before the member starts")
            open_.pos += got
            self._decoded += got
        left = size
        while left:
            data = open_.read(min(CHUNK, left))
            if not data:
                raise IntegrityError(detail=f"{open_.nested.member_path} ends {left} bytes before the member's end")
            open_.pos += len(data)
            self._decoded += len(data)
            left -= len(data)
            yield data

    def close(self) -> None:
        self._open = None
        self._base.close()
