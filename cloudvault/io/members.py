"""Verified byte streams of catalog members: one forward pass per archive, seekable copy when there is one.

Extract, verify, restore, repro and the mount all read members through here: `MemberReader` picks the source
(the seekable copy if present and whole, else the original, which must be as indexed), enters each archive at
the frame that holds the member, and hands bytes out only in pieces that verified against the catalog's piece
hashes (`PieceGate`; PieceMismatch names the object and the offset of the first bad piece; the bytes before it
verified). An object recorded without piece hashes (before schema 5) is withheld whole until its BLAKE3 matches.
`VerifiedRanges` gives the mount any range of an object the same way, from a cache of pieces that verified.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from functools import partial

import blake3

from cloudvault.archive.paths import MAX_HOPS
from cloudvault.archive.reader import ArchiveReader
from cloudvault.catalog.flagged import refusal, salvaged
from cloudvault.catalog.lookup import (
    archive_format,
    archive_location,
    archive_pieces,
    file_location,
    file_pieces,
    frame_table,
    member_at,
    member_before,
    member_pieces,
    nested_archives,
)
from cloudvault.errors import (
    ChangedSinceRecorded,
    CorruptArchive,
    HashMismatch,
    IntegrityError,
    NoPieceHashes,
    PieceMismatch,
    StaleArchive,
    UnsafeMember,
)
from cloudvault.models import Hole, Member
from cloudvault.pieces import PART, PIECE, PIECE_DIGEST, first_parts, part_hasher, piece_hasher, read_pieces
from cloudvault.tools.mirrorfs import open_mirror

CHUNK = 1 << 20
SPOOL_LIMIT = 4 << 30  # an object without piece hashes is withheld (spooled) whole up to this size, else refused
SPOOL_IN_MEMORY = 64 << 20
STREAM_READ = 128 << 10  # a ranged read this large is a stream's (the kernel's readahead asks this much once a reader
# reads on; `head -c 1` asks 16 KiB): checked by whole pieces, a stream's next parts would each cost a call of their own


def read_order(members: Iterable[Member]) -> list[Member]:
    """The order that reads each archive in one forward pass: by archive, then by offset; plain files first."""
    return sorted(members, key=lambda m: (m.archive or "", m.data_offset))


class PieceCheck:
    """What one object's bytes must be: its size, whole BLAKE3 and piece hashes (None: not recorded), and where
    recorded the hashes of its first piece's parts (a read at any offset checks those, a stream the pieces)."""

    def __init__(self, label: str, size: int, whole: str | None, pieces: bytes | None) -> None:
        self.label, self.size, self.whole = label, size, whole
        self.pieces, self.tree = read_pieces(pieces, size) or (None, False)
        self.parts = first_parts(pieces, size)

    @property
    def by_piece(self) -> bool:
        """Whether each piece can be checked alone: one piece (its hash is the whole's) or recorded pieces."""
        return self.whole is not None and (self.size <= PIECE or self.pieces is not None)

    def piece_size(self, index: int) -> int:
        return max(0, min(PIECE, self.size - index * PIECE))

    def hasher(self, index: int):
        """What to feed piece `index`'s bytes, then hand to verify."""
        return blake3.blake3() if self.size <= PIECE else piece_hasher(index, self.tree)

    def verify(self, index: int, h) -> None:
        """PieceMismatch unless h (this check's hasher(index), fed the piece's bytes) matches its recorded hash."""
        if self.size <= PIECE:
            ok = h.hexdigest() == self.whole
        else:
            ok = h.digest(PIECE_DIGEST) == self.pieces[index * PIECE_DIGEST : (index + 1) * PIECE_DIGEST]
        if not ok:
            raise PieceMismatch(path=self.label, offset=index * PIECE, size=self.piece_size(index))

    def spans(self, offset: int, end: int, parts: bool = True) -> list[tuple[int, int]]:
        """(start, size) of each span checked alone that bytes [offset, end) touch: with parts, the first piece's
        parts where their hashes are recorded (a read of an object's start decodes and hashes 64 KiB, not 1 MiB),
        else pieces."""
        out = []
        while offset < end:
            if parts and self.parts is not None and offset < PIECE:
                start, size = offset - offset % PART, PART
            else:
                start = offset - offset % PIECE
                size = self.piece_size(start // PIECE)
            out.append((start, size))
            offset = start + size
        return out

    def _is_part(self, start: int, size: int) -> bool:
        return self.parts is not None and start < PIECE and size == PART

    def span_hasher(self, start: int, size: int):
        """What to feed the bytes of the span (start, size) (one of spans()), then hand to verify_span."""
        return part_hasher(start // PART) if self._is_part(start, size) else self.hasher(start // PIECE)

    def verify_span(self, start: int, size: int, h) -> None:
        """PieceMismatch unless h (span_hasher(start, size), fed the span's bytes) matches its recorded hash."""
        if not self._is_part(start, size):
            return self.verify(start // PIECE, h)
        at = start // PART * PIECE_DIGEST
        if h.digest(PIECE_DIGEST) != self.parts[at : at + PIECE_DIGEST]:
            raise PieceMismatch(path=self.label, offset=start, size=PART)


class PieceGate:
    """Bytes in, in chunks of any size; out only in whole pieces that verified. Views are copied when held (the
    buffers behind them may be reused); a sparse member's holes stay `Hole`s."""

    def __init__(self, check: PieceCheck) -> None:
        self.check = check
        self.handed = 0  # bytes handed out, all verified
        self._held: list[bytes] = []
        self._held_len = 0
        self._index = 0
        self._hash = check.hasher(0)

    def feed(self, chunk) -> Iterator[bytes]:
        """The parts of the pieces chunk completes, each piece once it verified (PieceMismatch at the first that
        does not, after the ones before it)."""
        hole = type(chunk) is Hole
        if not isinstance(chunk, bytes):
            chunk = bytes(chunk)
        pos, n = 0, len(chunk)
        while pos < n:
            want = self.check.piece_size(self._index) - self._held_len
            if want <= 0:
                raise IntegrityError(detail=f"{self.check.label} holds more than the {self.check.size} bytes indexed")
            take = min(want, n - pos)
            part = chunk if take == n else (Hole(take) if hole else chunk[pos : pos + take])
            self._hash.update(part)
            self._held.append(part)
            self._held_len += take
            pos += take
            if self._held_len == self.check.piece_size(self._index):
                yield from self._release()

    def _release(self) -> list[bytes]:
        self.check.verify(self._index, self._hash)
        held, self._held = self._held, []
        self.handed += self._held_len
        self._held_len, self._index = 0, self._index + 1
        self._hash = self.check.hasher(self._index)
        return held

    def end(self) -> None:
        """IntegrityError if the bytes ended before the object's indexed size (an empty one is checked here)."""
        if self.check.size == 0:
            self.check.verify(0, self._hash)
        elif self.handed != self.check.size:
            got = self.handed + self._held_len
            raise IntegrityError(detail=f"{self.check.label} ends after {got} of its {self.check.size} bytes")


class MemberStream:
    """The bytes of one member, handed out only in pieces that verified; once all have, blake3 is known."""

    def __init__(self, member: Member, expected: str | None, chunks: Iterator[bytes], pieces: bytes | None = None,
                 *, size: int | None = None, withhold: bool = True) -> None:  # fmt: skip
        """size: of the data (a hardlink's is its target's; member.size when not given)."""
        self.member = member
        self.expected = expected
        self._chunks = chunks
        self._check = PieceCheck(member.label, member.size if size is None else size, expected, pieces)
        self._withhold = withhold
        self.blake3: str | None = None
        self.size = 0
        self.withheld = False  # held back whole: recorded without piece hashes

    @property
    def verified(self) -> bool:
        return self.expected is not None and self.blake3 == self.expected

    def __iter__(self) -> Iterator[bytes]:
        if self.expected is None or not self._withhold:
            yield from self._hashed()  # nothing recorded to check against, or verify (it hands nothing out)
        elif self._check.by_piece:
            yield from self._by_piece()
        else:
            yield from self._withheld()

    def _by_piece(self) -> Iterator[bytes]:
        gate = PieceGate(self._check)
        for chunk in self._chunks:
            for part in gate.feed(chunk):
                self.size += len(part)
                yield part
        gate.end()
        self.blake3 = self.expected  # every piece matched the hashes recorded with it

    def _hashed(self) -> Iterator[bytes]:
        h = blake3.blake3()
        for chunk in self._chunks:
            h.update(chunk)
            self.size += len(chunk)
            yield chunk
        self._found(h.hexdigest())

    def _found(self, digest: str) -> None:
        self.blake3 = digest
        if self.expected is not None and digest != self.expected:
            raise HashMismatch(path=self.member.label, expected=self.expected, found=digest)

    def _withheld(self) -> Iterator[bytes]:
        """No piece hashes (recorded before schema 5): every byte held back until the whole BLAKE3 matches."""
        import tempfile

        if self._check.size > SPOOL_LIMIT:
            raise NoPieceHashes(path=self.member.label)
        self.withheld = True
        h = blake3.blake3()
        with tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY) as spool:  # unnamed: gone however this ends
            for chunk in self._chunks:
                h.update(chunk)
                spool.write(chunk)
            self._found(h.hexdigest())
            spool.seek(0)
            while chunk := spool.read(CHUNK):
                self.size += len(chunk)
                yield chunk


class MemberReader:
    """Opens members in read order; keeps one ArchiveReader per archive so a pass never goes back."""

    def __init__(
        self, conn: sqlite3.Connection, on_data: Callable[[int], None] | None = None, *, originals: bool = False
    ) -> None:
        self.conn = conn
        self.on_data = on_data
        self.originals = originals  # verify reads the mirror's own archives, not the seekable copies
        self._readers: dict[int, ArchiveReader] = {}
        self._pieces: dict[int, dict[tuple[int, str], bytes]] = {}  # archive's file id -> its members' pieces
        self.frames_read = 0
        self.bytes_decompressed = 0

    def __enter__(self) -> MemberReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self, member: Member) -> MemberStream:
        """The verified stream of member's data (a hardlink yields its target's; a sparse member its expanded
        bytes, holes as `Hole` chunks)."""
        withhold = not self.originals  # verify hashes what it reads and hands nothing out
        if member.archive is None:
            refuse_changed(self.conn, member, member)
            pieces = file_pieces(self.conn, member.file_id)
            return MemberStream(member, member.blake3, self._plain_chunks(member), pieces, withhold=withhold)
        data = self._stored_member(member)
        refuse_changed(self.conn, member, data, use_copy=not self.originals)
        reader = self._reader(data.file_id)
        pieces = self._pieces_of(data)
        size = data.size
        if data.sparse_map is None:
            chunks = reader.chunks(data.data_offset, data.size)
        else:  # its bytes end where its map ends (sparse.expand)
            from cloudvault.archive import sparse  # here: a sparse member is rare, and a small extract never needs it

            parts = sparse.decode_map(data.sparse_map)
            chunks = sparse.expand(reader.chunks(data.data_offset, sparse.stored_size(parts)), parts, data.size)
            size = sparse.expanded_size(parts)
        return MemberStream(member, member.blake3, chunks, pieces, size=size, withhold=withhold)

    def _pieces_of(self, data: Member) -> bytes | None:
        """The piece hashes of an archive member's data (those of its archive loaded once)."""
        found = self._pieces.get(data.file_id)
        if found is None:
            found = self._pieces[data.file_id] = archive_pieces(self.conn, data.file_id)
        return found.get((data.data_offset, data.path))

    def _stored_member(self, member: Member) -> Member:
        """The file member whose stored bytes are member's data: itself, or a hardlink's target as it was at the
        link's place in the archive (a link to a link followed)."""
        data = member
        for _ in range(MAX_HOPS):
            if data.type != "hardlink":
                break
            target = member_before(self.conn, data.file_id, data.link_target or "", data.data_offset)
            if target is None:
                why = f"hardlink to {data.link_target!r}, which no earlier member is"
                raise UnsafeMember(path=member.path, why=why)
            data = target
        if data.type != "file":
            raise UnsafeMember(path=member.path, why=f"{data.type} members have no data to read")
        return data

    def _reader(self, file_id: int) -> ArchiveReader:
        reader = self._readers.get(file_id)
        if reader is None:
            reader = self._readers[file_id] = open_archive(self.conn, file_id, not self.originals, self.on_data)
        return reader

    def _plain_chunks(self, member: Member) -> Iterator[bytes]:
        root, path, raw, _, _ = file_location(self.conn, member.file_id)
        with open_plain(root, path, raw) as fh:
            while chunk := fh.read(CHUNK):
                if self.on_data:
                    self.on_data(len(chunk))
                yield chunk

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
            self.frames_read += reader.frames_read
            self.bytes_decompressed += reader.bytes_decompressed
        self._readers.clear()


def refuse_changed(conn: sqlite3.Connection, member: Member, data: Member, use_copy: bool = True) -> None:
    """ChangedSinceRecorded when data (member's own bytes, or a hardlink's target) was flagged changed in place or
    damaged by `vault index`: nothing of it is read (unless use_copy and the seekable copy vault made of its
    archive, whose bytes are as recorded, is whole: it is read from there)."""
    why = refusal(conn, data)
    if why is None or (use_copy and data.archive is not None and _copy_whole(archive_location(conn, data.file_id))):
        return
    raise ChangedSinceRecorded(path=member.label, why=why)


def _copy_whole(loc) -> bool:
    return bool(loc.copy_path) and os.path.exists(loc.copy_path) and os.path.getsize(loc.copy_path) == loc.copy_size


class PieceCache:
    """Pieces that verified, by (object key, piece index), at most limit bytes of them, least recently used out
    first; safe for concurrent FUSE threads. A piece is handed out from here only, never read again unchecked, and
    made once however many readers want it at the same time (the kernel's readahead asks for the same piece from
    two threads: a second forward decode of a one-frame archive would double the wait)."""

    def __init__(self, limit: int = 64 << 20) -> None:
        import threading  # here, not at the top: extract imports this module and never caches pieces

        self.limit, self.used = limit, 0
        self._pieces: OrderedDict[tuple, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._busy: dict[tuple, threading.Lock] = {}
        self._lock_type = threading.Lock

    def get(self, key: tuple) -> bytes | None:
        with self._lock:
            found = self._pieces.get(key)
            if found is not None:
                self._pieces.move_to_end(key)
            return found

    def get_or_make(self, key: tuple, make: Callable[[], bytes]) -> bytes:
        """The piece at key, made by make() (which verifies it) if not here; one make at a time per key."""
        found = self.get(key)
        if found is not None:
            return found
        with self._lock:
            busy = self._busy.setdefault(key, self._lock_type())
        try:
            with busy:  # a second reader of the same piece waits for the first one's
                found = self.get(key)
                if found is None:
                    found = make()
                    self.put(key, found)
        finally:
            with self._lock:
                self._busy.pop(key, None)
        return found

    def drop(self, key: tuple, data) -> None:
        """Forget the piece at key if it is still data (the mount's piece checked in a frame since let go)."""
        with self._lock:
            if self._pieces.get(key) is data:
                del self._pieces[key]
                self.used -= len(data)

    def put(self, key: tuple, data: bytes) -> None:
        with self._lock:
            if key not in self._pieces:
                self._pieces[key] = data
                self.used += len(data)
            while self.used > self.limit and self._pieces:
                _, old = self._pieces.popitem(last=False)
                self.used -= len(old)


class VerifiedRanges:
    """read(offset, size) of one object at any offset, every byte out of a piece that verified: the pieces (or, for a
    read smaller than STREAM_READ, the first piece's parts: PieceCheck.spans) that cover the range are read whole
    (read_raw), checked, kept in the cache by (key, start, size), and sliced. An object of more than one
    piece without piece hashes is refused (NoPieceHashes): it cannot be read in ranges and checked."""

    def __init__(self, key: tuple, read_raw: Callable[[int, int], bytes], check: PieceCheck,
                 cache: PieceCache) -> None:  # fmt: skip
        self.key, self._read_raw, self.check, self._cache = key, read_raw, check, cache

    def __call__(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self.check.size)
        if end <= offset:
            return b""
        if self.check.whole is None:  # the catalog has no hash (unreadable when indexed): nothing to check
            return self._read_raw(offset, end - offset)
        if not self.check.by_piece:
            raise NoPieceHashes(path=self.check.label)
        parts = []
        for at, span in self._spans(offset, end, size):
            piece = self._span(at, span)
            lo, hi = max(offset, at) - at, min(end, at + span) - at
            parts.append(piece if lo == 0 and hi == len(piece) else piece[lo:hi])
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _spans(self, offset: int, end: int, size: int) -> list[tuple[int, int]]:
        """The spans checked alone (PieceCheck.spans) that a read of size bytes, [offset, end) of them in the object,
        touches: a stream's read (STREAM_READ or more) by whole pieces, a smaller one by parts where recorded."""
        return self.check.spans(offset, end, parts=size < STREAM_READ)

    def _span(self, start: int, size: int) -> bytes:
        return self._cache.get_or_make((*self.key, start, size), lambda: self._verified_span(start, size))

    def _verified_span(self, start: int, size: int) -> bytes:
        data = self._read_raw(start, size)
        if len(data) != size:
            raise IntegrityError(detail=f"{self.check.label}: {len(data)} bytes at offset {start}, not {size}")
        h = self.check.span_hasher(start, size)
        h.update(data)
        self.check.verify_span(start, size, h)
        return data

    def close(self) -> None:
        close = getattr(self._read_raw, "close", None)
        if close:
            close()


def open_plain(root: str, path: str, raw: bytes | None):
    """A plain mirror file, opened only if it is a regular file inside the mirror root (no link out, no FIFO)."""
    mirror = open_mirror(root)
    if mirror.remote:
        return mirror.open(path, raw)
    full = mirror.full(path, raw)
    real_root = os.path.realpath(os.fsencode(mirror.root))
    real = os.path.realpath(full)
    if not real.startswith(real_root + b"/"):
        raise UnsafeMember(path=path, why="it is a link that leaves the mirror")
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeMember(path=path, why="it is not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def archive_source(conn: sqlite3.Connection, file_id: int, use_copy: bool = True):
    """How to open the archive to read members from, and its frame table: the seekable copy if it is there and
    whole, else the original, which must be as indexed (size, mtime) or the catalog's offsets are not trusted."""
    loc = archive_location(conn, file_id)
    if loc.status != "ok" and not salvaged(conn, file_id):  # a salvaged one's damaged members are flagged each
        raise CorruptArchive(path=loc.path, detail=f"flagged {loc.status} when indexed; its members cannot be trusted")
    mirror = open_mirror(loc.root)
    now = mirror.stat(loc.path, loc.raw_path)
    if now is not None and now != (loc.size, loc.mtime_ns):
        what = f"size {loc.size} -> {now[0]}" if now[0] != loc.size else "mtime changed"
        raise StaleArchive(path=loc.path, what=what, entry=loc.entry_id)
    if use_copy and loc.copy_path and os.path.exists(loc.copy_path) and os.path.getsize(loc.copy_path) == loc.copy_size:
        return partial(open, loc.copy_path, "rb"), frame_table(conn, loc.archive_id, seekable_copy=True)
    if now is None:
        raise IntegrityError(detail=f"{loc.path} is gone from the mirror and has no seekable copy")
    return partial(mirror.open, loc.path, loc.raw_path), frame_table(conn, loc.archive_id)


def open_archive(conn: sqlite3.Connection, file_id: int, use_copy: bool = True,
                 on_data: Callable[[int], None] | None = None):  # fmt: skip
    """The reader of an archive's decompressed stream from archive_source: by its zstd frames, a zip's by its
    members' records, or (another format) from the seek point before each read; with the archives it holds as
    members (archive/nested.py) in its raw space, each decoded from the outer member's verified bytes."""
    reader = _stream_reader(conn, file_id, use_copy, on_data)
    nested = nested_archives(conn, file_id)
    if not nested:
        return reader
    from cloudvault.archive.nested import NestedSpace  # here: most archives hold none

    label = archive_location(conn, file_id).path.rsplit("/", 1)[-1]
    outers = {}  # each nested archive's outer member and check, asked now (a read may be in another thread)
    for n in nested:
        try:
            outers[n] = outer_member(conn, file_id, n)
        except IntegrityError as exc:  # raised when that archive is read, not before
            outers[n] = exc
    return NestedSpace(reader, nested, partial(_verified_outer, outers, reader), label)


def _stream_reader(conn: sqlite3.Connection, file_id: int, use_copy: bool, on_data: Callable[[int], None] | None):
    opener, frames = archive_source(conn, file_id, use_copy)
    fmt, points = archive_format(conn, file_id)
    if fmt == "tar.zst":
        return ArchiveReader(opener, frames, on_data)
    if fmt == "zip":  # its frames are its members' records, each read by its own method
        from cloudvault.archive.zip import ZipReader  # here: extracting from a .tar.zst never needs it

        return ZipReader(opener(), frames, on_data)
    from cloudvault.archive.decoded import SeekPointReader  # here: extracting from a .tar.zst never needs it

    return SeekPointReader(opener, fmt, points, on_data)


def outer_member(conn: sqlite3.Connection, file_id: int, nested) -> tuple[Member, PieceCheck]:
    """The member whose bytes a nested archive is, and what they must be; refused (as its own read is) when the
    index flagged it, or when it cannot be checked piece by piece."""
    member = member_at(conn, file_id, nested.member_path, nested.member_offset)
    if member is None or member.blake3 is None:
        raise IntegrityError(detail=f"{nested.member_path}: the archive member holding it has no recorded hash")
    refuse_changed(conn, member, member, use_copy=False)
    check = PieceCheck(member.label, member.size, member.blake3,
                       member_pieces(conn, file_id, member.data_offset, member.path))  # fmt: skip
    if not check.by_piece:
        raise NoPieceHashes(path=member.label)
    return member, check


def _verified_outer(outers: dict, reader, nested) -> Iterator[bytes]:
    """The bytes of the member a nested archive is, in pieces that verified (the inner decoder sees no other)."""
    if isinstance(outers[nested], IntegrityError):
        raise outers[nested]
    member, check = outers[nested]
    gate = PieceGate(check)
    for chunk in reader.chunks(member.data_offset, member.size):
        yield from gate.feed(chunk)
    gate.end()


def read_together(
    reader: MemberReader, members: Iterable[Member], span: int = 8 * CHUNK
) -> Iterator[tuple[Member, bytes | None]]:
    """Small file members of one archive (at most CHUNK bytes each, no sparse map, in data-offset order) read as
    runs of the decompressed stream of up to span bytes, each checked against its BLAKE3 before it is handed out;
    one that does not verify comes with None, and so does one with no hash to check, its bytes never decoded (a
    zip member vault does not read, encrypted or in a method it lacks, is not decoded to be thrown away: it would
    fail, and take its run's other members with it). 200,000 small members cost a few reads, not 200,000 streams
    (`vault grep`); members are taken from the iterable a run at a time. The next run is decoded in a thread (zstd
    lets go of the GIL) while this one's members are hashed and handed out."""
    from concurrent.futures import ThreadPoolExecutor

    runs = _runs(iter(members), span)
    run = next(runs, None)
    if run is None:
        return
    archive = reader._reader(run[0].file_id)
    with ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(_decoded, archive, run)
        try:
            while run is not None:
                data = ahead.result()
                following = next(runs, None)
                if following is not None:
                    ahead = pool.submit(_decoded, archive, following)
                if run[0].blake3 is None:  # a run of its own, never decoded
                    yield run[0], None
                    run = following
                    continue
                start = run[0].data_offset
                for member in run:
                    piece = data[member.data_offset - start : member.data_offset - start + member.size]
                    yield member, piece if blake3.blake3(piece).hexdigest() == member.blake3 else None
                run = following
        finally:
            ahead.cancel()  # a run decoding when the caller stopped is waited for: never read by two threads


def _runs(members: Iterator[Member], span: int) -> Iterator[list[Member]]:
    """The members in runs whose bytes span up to span bytes of the stream; a member with no hash is a run of its
    own (no run spans its bytes)."""
    run: list[Member] = []
    for member in members:
        if run and (member.blake3 is None or member.data_offset + member.size - run[0].data_offset > span):
            yield run
            run = []
        if member.blake3 is None:
            yield [member]
            continue
        run.append(member)
    if run:
        yield run


def _decoded(archive: ArchiveReader, run: list[Member]) -> bytes:
    if run[0].blake3 is None:  # nothing to check it against: not decoded
        return b""
    start, stop = run[0].data_offset, run[-1].data_offset + run[-1].size
    return b"".join(archive.chunks(start, stop - start))
