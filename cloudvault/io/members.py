"""Verified byte streams of catalog members: one forward pass per archive, seekable copy when there is one.

Extract, verify, restore and repro all read members through `MemberReader`: it picks the source (the seekable
copy if present and whole, else the original, which must be as indexed), enters each archive at the frame that
holds the member, and hashes every byte against the catalog's BLAKE3 (HashMismatch at the member's end).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable, Iterable, Iterator
from functools import partial

import blake3

from cloudvault.archive import sparse
from cloudvault.archive.paths import MAX_HOPS
from cloudvault.archive.reader import ArchiveReader
from cloudvault.catalog.flagged import refusal
from cloudvault.catalog.lookup import archive_location, file_location, frame_table, member_before
from cloudvault.errors import (
    ChangedSinceRecorded,
    CorruptArchive,
    HashMismatch,
    IntegrityError,
    StaleArchive,
    UnsafeMember,
)
from cloudvault.models import Member
from cloudvault.tools.mirrorfs import open_mirror

CHUNK = 1 << 20


def read_order(members: Iterable[Member]) -> list[Member]:
    """The order that reads each archive in one forward pass: by archive, then by offset; plain files first."""
    return sorted(members, key=lambda m: (m.archive or "", m.data_offset))


class MemberStream:
    """The bytes of one member, hashed as they pass; after the last chunk, blake3 is known and checked."""

    def __init__(self, member: Member, expected: str | None, chunks: Iterator[bytes]) -> None:
        self.member = member
        self.expected = expected
        self._chunks = chunks
        self.blake3: str | None = None
        self.size = 0

    @property
    def verified(self) -> bool:
        return self.expected is not None and self.blake3 == self.expected

    def __iter__(self) -> Iterator[bytes]:
        h = blake3.blake3()
        for chunk in self._chunks:
            h.update(chunk)
            self.size += len(chunk)
            yield chunk
        self.blake3 = h.hexdigest()
        if self.expected is not None and self.blake3 != self.expected:
            raise HashMismatch(path=self.member.label, expected=self.expected, found=self.blake3)


class MemberReader:
    """Opens members in read order; keeps one ArchiveReader per archive so a pass never goes back."""

    def __init__(
        self, conn: sqlite3.Connection, on_data: Callable[[int], None] | None = None, *, originals: bool = False
    ) -> None:
        self.conn = conn
        self.on_data = on_data
        self.originals = originals  # verify reads the mirror's own archives, not the seekable copies
        self._readers: dict[int, ArchiveReader] = {}
        self.frames_read = 0
        self.bytes_decompressed = 0

    def __enter__(self) -> MemberReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self, member: Member) -> MemberStream:
        """The verified stream of member's data (a hardlink yields its target's; a sparse member its expanded
        bytes, holes as `sparse.Hole` chunks)."""
        if member.archive is None:
            refuse_changed(self.conn, member, member)
            return MemberStream(member, member.blake3, self._plain_chunks(member))
        data = self._stored_member(member)
        refuse_changed(self.conn, member, data, use_copy=not self.originals)
        reader = self._reader(data.file_id)
        if data.sparse_map is None:
            return MemberStream(member, member.blake3, reader.chunks(data.data_offset, data.size))
        pieces = sparse.decode_map(data.sparse_map)
        stored = reader.chunks(data.data_offset, sparse.stored_size(pieces))
        return MemberStream(member, member.blake3, sparse.expand(stored, pieces, data.size))

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
            opener, frames = archive_source(self.conn, file_id, use_copy=not self.originals)
            reader = self._readers[file_id] = ArchiveReader(opener, frames, self.on_data)
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
    if loc.status != "ok":
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
