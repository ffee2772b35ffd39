"""Index one .tar.zst in one pass: frame table, archive BLAKE3, and every member's header, offsets and BLAKE3."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

import blake3

from cloudvault.archive.paths import unsafe_reason
from cloudvault.archive.tar import TarFormatError, TarHeader, iter_members
from cloudvault.archive.zstdframes import (
    ParallelFrameStream,
    ThreadedFrameStream,
    ZstdFormatError,
    looks_multi_frame,
)
from cloudvault.catalog.write import SHARD_INSERT
from cloudvault.hashing import BackgroundHasher
from cloudvault.index.secrets import SecretScanner
from cloudvault.mirrorfs import text_path
from cloudvault.models import Flag, Frame

TEXT_SNIFF = 8192
# Secrets live in logs, configs and scripts; data dumps (.bin, .pt, .npy ...) are not scanned, so scanning costs
# little on archives that are mostly dumps.
TEXT_SUFFIXES = (
    ".log",
    ".txt",
    ".out",
    ".err",
    ".console",
    ".sh",
    ".bash",
    ".env",
    ".json",
    ".jsonl",
    ".yaml",
    ".yml",
    ".toml",
    ".cfg",
    ".conf",
    ".ini",
    ".md",
    ".py",
    ".csv",
    ".tsv",
    ".html",
    ".netrc",
    ".dockercfg",
)
MAX_SCANNED_MEMBER = 256 << 20
MAX_FLAGS_PER_KIND = 50
BATCH = 2000


@dataclass
class ArchiveScan:
    """What one pass over an archive found; members themselves went to the shard file."""

    status: str = "ok"
    blake3: str = ""
    raw_size: int = 0
    member_count: int = 0
    frames: list[Frame] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    flag_counts: dict[str, int] = field(default_factory=dict)
    copy_tmp: str | None = None  # a seekable copy written in the same pass (vault index --optimize)
    copy_frames: list[Frame] = field(default_factory=list)

    def flag(self, kind: str, detail: str, member: str | None = None) -> None:
        self.flag_counts[kind] = self.flag_counts.get(kind, 0) + 1
        if self.flag_counts[kind] <= MAX_FLAGS_PER_KIND:
            self.flags.append(Flag(kind, detail, member))


def member_path(name: bytes) -> tuple[str, bytes | None]:
    """Catalog path of a tar name: leading './' and trailing '/' dropped; raw bytes kept if they differ."""
    norm = name
    while norm.startswith(b"./"):
        norm = norm[2:]
    norm = norm.rstrip(b"/") or (b"/" if name.startswith(b"/") else b".")
    text, raw = text_path(norm)
    return text, (name if raw is not None or norm != name else None)


_TEXT_SUFFIXES = tuple(s.encode() for s in TEXT_SUFFIXES)


def worth_scanning(name: bytes, size: int, first: bytes) -> bool:
    """A text file of a kind that holds credentials: by name (or no suffix at all), size, and no NUL up front."""
    base = name.rsplit(b"/", 1)[-1].lower()
    named = b"." not in base.lstrip(b".") or base.endswith(_TEXT_SUFFIXES)
    return named and size <= MAX_SCANNED_MEMBER and b"\0" not in first[:TEXT_SNIFF]


def _hash_member(data, header: TarHeader, pattern: re.Pattern[bytes] | None) -> tuple[str, list]:
    h = blake3.blake3()
    scanner, first = None, True
    for chunk in data.chunks():
        if first and pattern is not None and worth_scanning(header.name, header.size, chunk):
            scanner = SecretScanner(pattern)
        first = False
        h.update(chunk)
        if scanner:
            scanner.feed(chunk)
    return h.hexdigest(), (scanner.hits if scanner else [])


def scan_archive(
    fh: BinaryIO,
    shard: sqlite3.Connection,
    pattern: re.Pattern[bytes] | None,
    on_bytes: Callable[[int], None] | None = None,
    on_raw: Callable[[bytes], None] | None = None,
    opener: Callable[[], BinaryIO] | None = None,
) -> ArchiveScan:
    """Stream the archive once; members go to shard.members in batches, the rest into the returned scan.
    With an opener (more handles on the same file), frames are decoded two at a time."""
    scan = ArchiveScan()
    archive_hash = BackgroundHasher()

    def on_compressed(chunk: bytes) -> None:
        archive_hash.update(chunk)
        if on_bytes:
            on_bytes(len(chunk))

    batch: list[tuple] = []
    if opener is not None and _many_frames(fh):
        stream = ParallelFrameStream(fh, opener, on_compressed=on_compressed, on_raw=on_raw)
    else:
        stream = ThreadedFrameStream(fh, on_compressed=on_compressed, on_raw=on_raw)
    try:
        for header, data in iter_members(stream):
            batch.append(_member_row(header, data, pattern, scan))
            if len(batch) >= BATCH:
                shard.executemany(SHARD_INSERT, batch)
                batch.clear()
        stream.drain()
    except (ZstdFormatError, TarFormatError) as exc:
        scan.status = exc.kind
        scan.flag(exc.kind, str(exc))
        _finish_after_error(stream, fh, on_compressed)
    finally:
        stream.close()
    shard.executemany(SHARD_INSERT, batch)
    _resolve_hardlinks(shard)
    scan.frames = stream.frames
    scan.raw_size = stream.pos
    scan.blake3 = archive_hash.hexdigest()
    return scan


def _many_frames(fh: BinaryIO) -> bool:
    head = fh.read(32)
    size = fh.seek(0, 2)
    fh.seek(0)
    return looks_multi_frame(head, size)


def _resolve_hardlinks(shard: sqlite3.Connection) -> None:
    """A hardlink member carries its target's BLAKE3: extracting it yields the target's data."""
    if shard.execute("SELECT 1 FROM members WHERE type = 'hardlink' LIMIT 1").fetchone():
        shard.execute("CREATE INDEX members_path ON members(path)")
        shard.execute(
            "UPDATE members SET blake3 = (SELECT t.blake3 FROM members t WHERE t.path = members.link_target "
            "AND t.type = 'file') WHERE type = 'hardlink'"
        )


def _finish_after_error(stream: ThreadedFrameStream, fh, on_compressed: Callable[[bytes], None]) -> None:
    """A damaged archive is still hashed whole, so a later verify can tell whether it changed again: let the
    decompressing thread run to the end (tar damage), or read the rest of the file here (zstd damage)."""
    with contextlib.suppress(ZstdFormatError):
        stream.drain()
    stream.close()
    while chunk := fh.read(1 << 20):
        on_compressed(chunk)


def _member_row(header: TarHeader, data, pattern, scan: ArchiveScan) -> tuple:
    path, raw = member_path(header.name)
    link = None
    if header.type == "symlink":
        link = text_path(header.linkname)[0]
    elif header.type == "hardlink":
        link = member_path(header.linkname)[0]  # hardlinks name another member: same form as paths
    digest, hits = _hash_member(data, header, pattern) if header.type in ("file", "sparse", "other") else (None, [])
    scan.member_count += 1
    reason = unsafe_reason(path, header.type, link)
    if reason:
        scan.flag("unsafe_member", reason, path)
    if raw is not None and text_path(raw)[1] is not None:
        scan.flag("non_utf8_name", "member name is not valid UTF-8 (raw bytes kept)", path)
    for hit in hits:
        scan.flag("secret", hit.describe(), path)
    return (
        path,
        raw,
        header.type,
        header.size,
        header.mode,
        header.mtime,
        header.uid,
        header.gid,
        header.uname,
        header.gname,
        link,
        header.header_offset,
        header.data_offset,
        digest,
    )
