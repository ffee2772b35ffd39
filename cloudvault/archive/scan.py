"""The byte scan of one tar archive (.tar.zst; other compressions: archive/decoded.py): frame table, archive
BLAKE3, and every member's header, offsets and BLAKE3.

Iterating an `ArchiveScan` yields one `MemberRecord` per member, in archive order; once the iteration ends its
`result` holds the frames, the archive's hash, the status and the flags. Nothing here knows about SQLite:
`vault index` writes the records, `vault verify` compares them with the catalog.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections import deque, namedtuple
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, NamedTuple, Protocol

import blake3

from cloudvault.archive import sparse
from cloudvault.archive.formats import ARCHIVE_NAMES, HEAD, might_be_archive, nested_format
from cloudvault.archive.paths import LinkChains, unsafe_reason
from cloudvault.archive.plainruns import PlainRun, PlainRuns
from cloudvault.archive.tar import BLOCK, MemberData, TarFormatError, TarHeader, iter_members
from cloudvault.archive.zstdframes import (
    DamagedFrame,
    ParallelFrameStream,
    ThreadedFrameStream,
    ZstdFormatError,
    damaged_frame_after,
    looks_multi_frame,
)
from cloudvault.hashing import BackgroundHasher, HashJob, HashThreads, PieceThread, member_hex_digests
from cloudvault.models import Flag, Frame, NestedArchive
from cloudvault.pieces import ONE_PASS, PIECE, PieceHasher
from cloudvault.tools.mirrorfs import text_path

MAX_FLAGS_PER_KIND = 50
DATA_TYPES = ("file", "other")  # members whose data is hashed; a hardlink's is its target's
MEMBER_FIELDS = (
    "path raw_path type size mode mtime uid gid uname gname link_target header_offset data_offset blake3 "
    "raw_link_target sparse_map pieces"
)


class MemberRecord(namedtuple("MemberRecord", MEMBER_FIELDS)):
    """One tar member as the catalog stores it. blake3: of the member's data as extracted (a sparse member's
    expanded bytes; a hardlink's target as it was at that point of the archive), None for members without data;
    raw_link_target: the link's bytes when its text would lose them; sparse_map: a sparse member's pieces (JSON);
    pieces: the BLAKE3 of each 1 MiB of its data as extracted (hashing.PieceHasher), None for one piece or less."""

    __slots__ = ()


class Inspector(Protocol):
    """Looks at a member's bytes as they pass (a secret scanner); reports (flag kind, detail) pairs at the end."""

    def feed(self, chunk: bytes) -> None: ...

    def findings(self) -> list[tuple[str, str]]: ...


# (member name, size, the first INSPECT_HEAD bytes of its data) -> an Inspector for this member, or None to let it pass
Inspect = Callable[[bytes, int, bytes], Inspector | None]
INSPECT_HEAD = 8192


class Damage(NamedTuple):
    """A frame that does not decode: its index and compressed offset, and the decoded bytes it held (raw_end None:
    to the end, where its size is not known)."""

    frame: int
    comp_offset: int
    raw_start: int
    raw_end: int | None


@dataclass
class ScanResult:
    """What one pass over an archive found besides its members."""

    status: str = "ok"
    blake3: str = ""
    pieces: bytes | None = None  # of the archive file's own (compressed) bytes
    raw_size: int = 0
    member_count: int = 0
    frames: list[Frame] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    format: str = "tar.zst"  # archive/formats.py
    seek_points: tuple[str, bytes] | None = None  # (kind, data) of a gzip or bzip2 archive: archive/decoded.py
    nested: list[NestedArchive] = field(default_factory=list)  # members read once more as archives (archive/nested.py)
    flag_counts: dict[str, int] = field(default_factory=dict)
    damaged: list[Damage] = field(default_factory=list)  # frames that do not decode, for their members' flags

    def flag(self, kind: str, detail: str, member: str | None = None) -> None:
        self.flag_counts[kind] = self.flag_counts.get(kind, 0) + 1
        if self.flag_counts[kind] <= MAX_FLAGS_PER_KIND:
            self.flags.append(Flag(kind, detail, member))


_INTERPRETER = re.compile(r"python[0-9.]*")


def venv_interpreter_root(path: str, kind: str, link: str | None) -> str | None:
    """The env root when this member is shaped as a venv's interpreter link: `ROOT/bin/python*` a symlink to an
    absolute python (`home` of pyvenv.cfg) or to a sibling `python*` (`python3.12 -> python`); else None."""
    if kind != "symlink" or not link:
        return None
    folder, _, name = path.rpartition("/")
    root, _, bin_dir = folder.rpartition("/")
    if bin_dir != "bin" or not _INTERPRETER.fullmatch(name):
        return None
    target = link.rpartition("/")[2] if link.startswith("/") else link
    if not _INTERPRETER.fullmatch(target) or (not link.startswith("/") and "/" in link):
        return None
    return root


def member_path(name: bytes) -> tuple[str, bytes | None]:
    """Catalog path of a tar name: leading './' and trailing '/' dropped; raw bytes kept if they differ."""
    if not name.startswith(b"./") and not name.endswith(b"/") and name:  # most names: nothing to drop
        return text_path(name)
    norm = name
    while norm.startswith(b"./"):
        norm = norm[2:]
    norm = norm.rstrip(b"/") or (b"/" if name.startswith(b"/") else b".")
    text, raw = text_path(norm)
    return text, (name if raw is not None or norm != name else None)


class ArchiveScan:
    """One forward pass over an archive. With an opener (more handles on the same file), the frames of a
    multi-frame archive are decoded `decoders` at a time; on_raw sees every decompressed byte (a
    seekable copy). With a prefilter (whether bytes may hold what the inspectors look for), small members are
    inspected in batches. With more than two decoders, the cores they are given also hash: members of 64 KiB and
    more are hashed by `decoders` threads of their own (many members at once, each from views of the decoded
    pieces, which stay pinned until hashed) while the tar walk goes on, and records come out in archive order as
    their hashes are ready; the compressed bytes are hashed on up to `decoders` threads too. With two, a member's
    large updates are hashed whole where it is read while a PieceThread hashes their pieces. With nested, a member
    whose bytes are a tar archive (formats.nested_format) is read once more as one, after the rest (archive/nested.py).
    """

    def __init__(  # noqa: PLR0913 (keywords only, each one optional)
        self,
        fh: BinaryIO,
        *,
        inspect: Inspect | None = None,
        on_bytes: Callable[[int], None] | None = None,
        on_raw: Callable[[bytes], None] | None = None,
        opener: Callable[[], BinaryIO] | None = None,
        prefilter: Callable[[bytes], bool] | None = None,
        decoders: int = 2,
        fmt: str = "tar.zst",
        nested: bool = True,
    ) -> None:
        self._fh = fh
        self._nest = nested
        self._nest_formats: dict[int, tuple] = {}  # data offset -> (format, its bytes kept or None) of archive members
        self._kept = 0  # bytes of them kept so far
        self._prefilter = prefilter
        self._format = fmt
        self._decoders = decoders
        self._hash_threads = decoders if decoders > 2 else 1
        self._hashers: HashThreads | None = None
        self._beside: PieceThread | None = None
        self._stream_in_use: ThreadedFrameStream | None = None
        self._inspect = inspect
        self._batch = _InspectBatch(prefilter, self) if inspect and prefilter else None
        self._on_bytes = on_bytes
        self._on_raw = on_raw
        self._opener = opener
        self.result = ScanResult()
        self._chains = LinkChains()
        # path -> BLAKE3 of what extracting so far left there (None: nothing with data), for hardlinks
        self._contents: dict[str, str | None] = {}
        # what members left there not yet in _contents, as (paths, their BLAKE3s) in archive order: put there
        # (_settle) only once a hardlink reads it (most archives hold none), or once UNSETTLED_MAX are waiting
        self._unsettled: list[tuple[list[str], list]] = []
        self._venv_links: list[tuple[str, str, str]] = []  # (env root, reason, path): judged once all is read
        self._venv_roots: set[str] = set()  # folders holding a pyvenv.cfg

    def _damage(self, kind: str, offset: int, detail: str) -> None:
        """A header the walk could not read: the archive is flagged, the members around it are still read."""
        if self.result.status == "ok":
            self.result.status = kind
        self.result.flag(kind, f"{detail} at offset {offset}")

    def __iter__(self) -> Iterator[MemberRecord]:
        nested: list[tuple] = []  # members to read once more as archives: (record, format, their bytes kept or None)
        yield from self._scan(nested)
        if nested and self.result.status == "ok":
            yield from self._nested(nested)

    def _scan(self, nested: list[tuple]) -> Iterator[MemberRecord]:
        """The archive's own members, in order (those that are archives noted in nested), then its result."""
        archive_hash = BackgroundHasher(self._hash_threads)

        def on_compressed(chunk: bytes) -> None:
            archive_hash.update(chunk)
            if self._on_bytes:
                self._on_bytes(len(chunk))

        stream = self._stream_in_use = self._stream(on_compressed)
        self._hashers = HashThreads(self._hash_threads) if self._hash_threads > 1 else None
        # pieces hashed in a second pass beside the whole (where the one-pass extension is not in use)
        self._beside = PieceThread() if not ONE_PASS and self._hashers is None and self._decoders > 1 else None
        after: list[Frame] = []  # frames found again after a damaged one
        try:
            for rec in self._walk(stream):
                if self._nest_formats and rec.data_offset in self._nest_formats and rec.blake3:
                    nested.append((rec, *self._nest_formats[rec.data_offset]))
                yield rec
        except (ZstdFormatError, TarFormatError) as exc:
            self.result.status = exc.kind
            self.result.flag(exc.kind, str(exc))
            _finish_after_error(stream, self._fh, on_compressed)
            if isinstance(exc, ZstdFormatError) and exc.kind == "corrupt_frame" and self._opener is not None:
                yield from self._salvage(stream.frames, after)
        finally:
            self._judge_venv_links()
            if self._hashers:
                self._hashers.close()
            if self._beside:
                self._beside.close()
            if self._batch:  # the members read so far are inspected, even when the archive ends in damage
                self._batch.flush()
            stream.close()
            self.result.frames = stream.frames + after
            self.result.format = self._format
            self.result.seek_points = getattr(stream, "seek_points", None)
            self.result.raw_size = max(stream.pos, after[-1].raw_offset + after[-1].raw_size if after else 0)
            self.result.blake3 = archive_hash.hexdigest()
            self.result.pieces = archive_hash.pieces()
            if self._format == "tar.xz" and self.result.status == "ok":
                self._note_xz_blocks()

    def _note_xz_blocks(self) -> None:
        """An xz archive of one block is flagged (not damage): a member of it is decoded from the archive's start."""
        from cloudvault.archive.decoded import ONE_BLOCK, one_xz_block

        if one_xz_block(self._fh):
            self.result.flag("xz_one_block", ONE_BLOCK)

    def _walk(self, stream: ThreadedFrameStream, resume: bool = False) -> Iterator[MemberRecord]:
        """The records of the members the stream holds, in archive order as their hashes are ready; on damage,
        those read before it, then the error."""
        waiting: deque[MemberRecord] = deque()  # records whose member is still being hashed, in archive order
        try:
            for item in iter_members(stream, self._damage, resume=resume, runs=PlainRuns()):
                if type(item) is PlainRun:
                    records, hashed = self._run_records(item)
                    if hashed and not waiting:  # the usual case: all of them hashed here, none waiting before
                        yield from records
                        continue
                    waiting.extend(records)
                else:
                    waiting.append(self._record(*item))
                while waiting and _ready(waiting[0]):
                    yield _hashed(waiting.popleft())
            stream.drain()
        except (ZstdFormatError, TarFormatError):
            yield from map(_hashed, waiting)  # the members before the damage, as without threads
            raise
        yield from map(_hashed, waiting)

    def _salvage(self, frames: list[Frame], found: list[Frame]) -> Iterator[MemberRecord]:
        """After a frame that does not decode (with no frame table of an earlier run to go by): the walk goes on at
        the frame after it (found by its block headers, or the next frame magic) when its header records its
        decoded size, so that the offsets after it are known; the frames found are added to found. Members the
        damaged frame holds are the caller's to flag (result.damaged)."""
        with self._opener() as fh:
            size = fh.seek(0, 2)
            while True:
                last = found[-1] if found else frames[-1] if frames else None
                comp_end, raw_end = (last.comp_offset + last.comp_size, last.raw_offset + last.raw_size) if last \
                    else (0, 0)  # fmt: skip
                index = len(frames) + len(found)
                bad = damaged_frame_after(fh, comp_end, size)
                if bad is None:
                    self.result.damaged.append(Damage(index, comp_end, raw_end, None))
                    return
                found.append(Frame(bad.start, bad.end - bad.start, raw_end, bad.raw_size))
                self.result.damaged.append(Damage(index, bad.start, raw_end, raw_end + bad.raw_size))
                self.result.flag("damaged_frame", f"frame {index} at compressed offset {bad.start} does not decode; "
                                 f"the frames after it were read from compressed offset {bad.end}")  # fmt: skip
                if bad.end >= size or not (yield from self._walk_after(bad, raw_end, found)):
                    return

    def _walk_after(self, bad: DamagedFrame, raw_start: int, found: list[Frame]) -> Iterator[MemberRecord]:
        """The members from the frame after bad on; True when another damaged frame stopped the walk."""
        with self._opener() as fh:
            stream = self._stream_in_use = ThreadedFrameStream(fh, comp_offset=bad.end,
                                                                raw_offset=raw_start + bad.raw_size)  # fmt: skip
            try:
                yield from self._walk(stream, resume=True)
            except (ZstdFormatError, TarFormatError) as exc:
                self.result.flag(exc.kind, str(exc))
                return isinstance(exc, ZstdFormatError) and exc.kind == "corrupt_frame"
            finally:
                stream.close()
                found.extend(stream.frames)
        return False

    def _stream(self, on_compressed: Callable[[bytes], None]) -> ThreadedFrameStream:
        if self._format != "tar.zst":  # gzip, bzip2, xz, plain tar: their seek points made as they are decoded
            from cloudvault.archive.decoded import ThreadedDecodedStream

            return ThreadedDecodedStream(self._fh, self._format, threads=max(1, self._decoders // 2),
                                         on_compressed=on_compressed, on_raw=self._on_raw)  # fmt: skip
        # a multi-frame archive is split into frames by the same code on one core or many: its frame table (of a
        # damaged archive too) cannot depend on the cores it was given
        if self._opener is not None and _many_frames(self._fh):
            return ParallelFrameStream(self._fh, self._opener, self._decoders, on_compressed=on_compressed,
                                       on_raw=self._on_raw)  # fmt: skip
        return ThreadedFrameStream(self._fh, on_compressed=on_compressed, on_raw=self._on_raw)

    def _record(self, header: TarHeader, data: MemberData) -> MemberRecord:
        path, raw = member_path(header.name)
        link = raw_link = None
        if header.type == "symlink":
            link, raw_link = text_path(header.linkname)
        elif header.type == "hardlink":
            link = member_path(header.linkname)[0]  # hardlinks name another member: same form as paths
            raw_link = header.linkname if text_path(header.linkname)[1] is not None else None
        digest = self._digest(header, data, path, link)
        self.result.member_count += 1
        for problem in header.problems:
            self.result.flag("corrupt_header", problem, path)
        reason = unsafe_reason(path, header.type, link)
        chained = self._chains.unsafe_reason(path, header.type, link)  # always: it records the symlinks
        reason = reason or chained
        if path == "pyvenv.cfg" or path.endswith("/pyvenv.cfg"):
            self._venv_roots.add(path[: -len("pyvenv.cfg")].rstrip("/"))
        root = venv_interpreter_root(path, header.type, link) if reason else None
        if root is not None:
            self._venv_links.append((root, reason, path))  # pyvenv.cfg may come after bin/ in the archive
        elif reason:
            self.result.flag("unsafe_member", reason, path)
        if raw is not None and text_path(raw)[1] is not None:
            self.result.flag("non_utf8_name", "member name is not valid UTF-8 (raw bytes kept)", path)
        h = header
        pieces = sparse.encode_map(h.sparse) if h.sparse is not None else None
        return MemberRecord(path, raw, h.type, h.size, h.mode, h.mtime, h.uid, h.gid, h.uname, h.gname, link,
                            h.header_offset, h.data_offset, digest, raw_link, pieces, None)  # fmt: skip

    def _run_records(self, run: PlainRun) -> tuple[list[MemberRecord], bool]:
        """The records of a run of plain members (plainruns.PlainRun), and whether each is hashed already. Small
        files with plain names (_plain_paths) are done here a stretch at a time: their BLAKE3 all in one call over
        the piece, their bytes to the inspector's batch as the one span of the piece they lie in, their records
        made by zip; any other member (a folder, a large member, a name to check or flag, any member once links
        were seen) goes through _record as a lone member would, in its place."""
        records: list[MemberRecord] = []
        count, piece, base = len(run.kinds), run.piece, run.base
        paths = [None] * count if self._chains else _plain_paths(run.joined_names, count, self._nest)
        # the small ones' BLAKE3 all in one call (one SIMD lane a chunk where the extension is built)
        digests = paths if self._chains else member_hex_digests(piece, run.offsets, run.sizes, BLOCK - base,
                                                                RUN_MEMBER)  # fmt: skip
        hashed, first = True, 0
        for lone in (*_lone_members(run, paths), count):
            if lone > first:
                records += self._small_files(run, paths, digests, first, lone)
            if lone == count:
                break
            record = self._record(run.header(lone), run.member_data(lone))
            hashed = hashed and not isinstance(record.blake3, (HashJob, PieceHasher))
            records.append(record)
            first = lone + 1
        return records, hashed

    def _small_files(self, run: PlainRun, paths: list, digests: list, first: int, end: int) -> list[MemberRecord]:
        """The records of members first..end of a run, small files with plain names, hashed already (digests);
        their bytes shown to the inspector."""
        paths, digests = paths[first:end], digests[first:end]
        sizes, offsets = run.sizes[first:end], run.offsets[first:end]
        self.result.member_count += end - first
        self._unsettled.append((paths, digests))
        if self._inspect is not None:
            self._inspect_span(paths, offsets, sizes, run)
        repeat = itertools.repeat
        return list(map(tuple.__new__, repeat(MemberRecord), zip(
            paths, repeat(None), repeat("file"), sizes, run.modes[first:end], run.mtimes[first:end],
            run.uids[first:end], run.gids[first:end], run.unames[first:end], run.gnames[first:end], repeat(None),
            offsets, map(BLOCK.__add__, offsets), digests, repeat(None), repeat(None), repeat(None),
            strict=False,  # the repeats have no end
        )))  # fmt: skip

    def _inspect_span(self, paths: list[str], offsets: list[int], sizes: list[int], run: PlainRun) -> None:
        """Small members with plain names (their tar names are their paths' UTF-8), one after another in the run's
        piece, shown to the inspector: in a batch where there is one, as the one span of the piece they lie in
        (their headers between them: a prefilter that passes it passes each member's bytes)."""
        base = run.base - BLOCK
        if self._batch is not None:
            start = offsets[0] - base
            self._batch.add_span(paths, [at - base - start for at in offsets], sizes,
                                 run.piece[start : offsets[-1] - base + sizes[-1]])  # fmt: skip
            return
        for path, at, size in zip(paths, offsets, sizes, strict=True):
            if size:
                self.inspect_whole(path, path.encode(), run.piece[at - base : at - base + size])

    def _settle(self) -> None:
        """What the members read so far left at their paths into _contents, in archive order."""
        for paths, digests in self._unsettled:
            self._contents.update(zip(paths, digests, strict=True))
        self._unsettled = []

    def _judge_venv_links(self) -> None:
        """An interpreter link of a venv (its root holds pyvenv.cfg) is what a venv is, not damage; one without a
        pyvenv.cfg beside its bin/ is flagged as any link leading outside."""
        for root, reason, path in self._venv_links:
            if root not in self._venv_roots:
                self.result.flag("unsafe_member", reason, path)
        self._venv_links = []

    def _digest(self, header: TarHeader, data: MemberData, path: str, link: str | None):
        """The member's BLAKE3 (or, for one of more than a piece, the PieceHasher or HashJob that has it and its
        piece hashes: `_hashed` takes both); a hardlink's is that of its target as extracting up to here left it (a
        later member of the target's name, a `tar -r` update, does not change what the link holds)."""
        if header.type == "hardlink":
            self._settle()
            digest = self._contents.get(link or "")
            if digest is None:
                self.result.flag("dangling_hardlink", f"hardlink to {link!r}, which no earlier member is", path)
        elif header.type in DATA_TYPES and header.sparse is not None:
            digest = self._hash_sparse(header, data, path)
        elif header.type in DATA_TYPES:
            digest = self._hash(header, data, path)
        else:
            digest = None
        self._unsettled.append(((path,), (digest if header.type != "other" else None,)))
        if len(self._unsettled) > UNSETTLED_MAX:  # many lone members: as cheap in the dict, and smaller
            self._settle()
        return digest

    def _hash_sparse(self, header: TarHeader, data: MemberData, path: str) -> PieceHasher:
        """A sparse member's BLAKE3 over its expanded bytes (holes as zeros); the inspector sees the stored ones."""
        h = PieceHasher(blake3.blake3.AUTO if header.size > HOLES_IN_THREADS else 1)
        inspector = self._inspect(header.name, header.size, b"") if self._inspect else None
        for chunk in sparse.expand(data.views(), header.sparse, header.size):
            h.update(chunk)
            if inspector and type(chunk) is not sparse.Hole:
                inspector.feed(bytes(chunk))
        self.flag_findings(path, inspector)
        return h

    def _hash(self, header: TarHeader, data: MemberData, path: str) -> str | HashJob | PieceHasher:
        """The member's BLAKE3 (or the job hashing it apart), its bytes shown to the inspector as they pass."""
        chunk = data.first_view()  # views, not copies: most bytes (dumps) are only hashed
        keep = self._keep_nested(header, path, chunk) if self._nest and might_be_archive(path) else None
        if keep is None and len(chunk) == header.size:  # the whole member at once: most small members
            if header.size and self._batch is not None and header.size <= BATCH_MEMBER:
                self._batch.add(path, header.name, chunk)
            elif header.size and self._inspect is not None:
                self.inspect_whole(path, header.name, chunk)
            if header.size <= PIECE and (self._hashers is None or header.size < HASH_APART):
                return blake3.blake3(chunk).hexdigest()  # most members: no call more than this
            if self._hashers is None:
                return _hashed_whole(chunk, self._beside)
            return self._hash_apart(chunk, data)
        inspector = self._inspect(header.name, header.size, bytes(chunk[:INSPECT_HEAD])) if self._inspect else None
        if inspector is None and self._hashers is not None and keep is None:
            return self._hash_apart(chunk, data)
        return self._hash_here(chunk, data, path, inspector, keep)

    def _hash_here(self, first: memoryview, data: MemberData, path: str, inspector, keep) -> PieceHasher:
        """The member's hash and pieces where it is read, its bytes shown to the inspector and, for a member that is
        an archive, written to keep (then scanned: archive/nested.py)."""
        h = PieceHasher(beside=self._beside)
        for chunk in itertools.chain((first,), data.views()):
            h.update(chunk)
            if keep is not None:
                keep.write(chunk)
            if inspector:
                inspector.feed(bytes(chunk))
        self.flag_findings(path, inspector)
        return h

    def _nested(self, candidates: list[tuple]) -> Iterator[MemberRecord]:
        """The members of the members that are archives: from their bytes kept as the walk read them, or (one too
        large to keep) read again through this archive's frames or seek points."""
        from cloudvault.archive.nested import MemberFile  # here: most archives hold none

        reader = self._reader_again() if any(kept is None for _, _, kept in candidates) else None
        try:
            files = [(rec, fmt, MemberFile(reader, rec.data_offset, rec.size) if kept is None else kept)
                     for rec, fmt, kept in candidates]  # fmt: skip
            yield from nest(self.result, files, inspect=self._inspect, prefilter=self._prefilter)
        finally:
            if reader is not None:
                reader.close()
            for _, _, kept in candidates:
                if kept is not None:
                    kept.close()

    def _reader_again(self):
        """This archive's decoded stream read again, at any offset, now its frames or seek points are known."""
        from cloudvault.archive.nested import Borrowed

        opener = self._opener or (lambda: Borrowed(self._fh))
        if self._format == "tar.zst":
            from cloudvault.archive.reader import ArchiveReader

            return ArchiveReader(opener, self.result.frames)
        from cloudvault.archive.decoded import SeekPointReader

        return SeekPointReader(opener, self._format, self.result.seek_points)

    def _keep_nested(self, header: TarHeader, path: str, first: memoryview):
        """Where to keep the bytes of a member that is an archive (formats.nested_format): a spooled file, or None
        (not an archive, or past what is kept of one archive's: it is read again once the walk is over)."""
        found = nested_format(bytes(first[:HEAD]), path) if header.size else None
        if found is None:
            return None
        import tempfile

        keep = None
        if self._kept + header.size <= KEEP_NESTED:
            self._kept += header.size
            keep = tempfile.SpooledTemporaryFile(SPOOL_NESTED)  # noqa: SIM115 (closed by _nested)
        self._nest_formats[header.data_offset] = (found, keep)
        return keep

    def _hash_apart(self, first: memoryview, data: MemberData) -> HashJob:
        """The member's bytes handed to a hashing thread as views of the decoded pieces, each pinned until hashed."""
        stream = self._stream_in_use
        job = self._hashers.start()
        try:
            job.add(first, stream.pin())
            for view in data.views():
                job.add(view, stream.pin())
        finally:  # a member cut short still ends its job: the thread moves on to the next
            job.end()
        return job

    def inspect_whole(self, path: str, name: bytes, data: bytes | memoryview) -> None:
        """Show a member's bytes, all at hand, to an inspector (if one wants them)."""
        inspector = self._inspect(name, len(data), bytes(data[:INSPECT_HEAD]))
        if inspector:
            inspector.feed(bytes(data))
            self.flag_findings(path, inspector)

    def flag_findings(self, path: str, inspector: Inspector | None) -> None:
        if inspector:
            for kind, detail in inspector.findings():
                self.result.flag(kind, detail, path)


def nest(result: ScanResult, candidates: Iterable[tuple], *, inspect=None, prefilter=None) -> Iterator[MemberRecord]:
    """The members of each (outer member record, its format, a seekable file of its bytes), placed one after another
    past result.raw_size; result gains their flags and rows (archive/nested.py says how)."""
    from cloudvault.archive.nested import bomb_limit, carry_flags, through  # here: most archives hold none

    for outer, fmt, fh in candidates:
        base = result.raw_size
        fh.seek(0)
        inner = ArchiveScan(fh, inspect=inspect, prefilter=prefilter, on_raw=bomb_limit(outer), decoders=1,
                            fmt=fmt, nested=False)  # fmt: skip
        for rec in inner:
            result.member_count += 1
            yield through(outer.path, rec, base)
        found = inner.result
        carry_flags(result, found, outer.path)
        if found.status == "ok" and found.blake3 != outer.blake3:
            result.flag("changed_while_indexing", f"{outer.path} read again as an archive gave other bytes than "
                        "its own pass; read again next run", outer.path)  # fmt: skip
        result.nested.append(NestedArchive(base, found.raw_size, fmt, found.status, outer.path, outer.data_offset))
        result.raw_size = base + found.raw_size


KEEP_NESTED = 1 << 30  # bytes of archive members kept as the walk reads them, in all (the others: read again after)
SPOOL_NESTED = 32 << 20  # of it, in memory; the rest in an unnamed temporary file
HASH_APART = 64 << 10  # a smaller member is hashed where it is read: handing it over would cost more
HOLES_IN_THREADS = 64 << 20  # a sparse member this large (mostly zeros) is hashed on several threads
BATCH_MEMBER = 64 << 10  # members up to this size are inspected in batches
RUN_MEMBER = min(HASH_APART, BATCH_MEMBER)  # smaller files of a plain run are hashed and batched in its loop
BATCH_BYTES = 1 << 20
UNSETTLED_MAX = 4096
SPAN_ALONE = 256 << 10  # a plain run's span of small members this large is searched where it lies, not copied


class _InspectBatch:
    """Small members' bytes gathered for one prefilter pass. A batch that holds nothing the inspectors look for
    (almost all of them) costs one search for all its members; the members of any other batch are inspected one
    by one, as a large member is. Findings are flagged when the batch is checked, before the scan ends."""

    def __init__(self, prefilter: Callable[[bytes], bool], scan: ArchiveScan) -> None:
        self._prefilter, self._scan = prefilter, scan
        # (paths, tar names or None (the paths' UTF-8), starts, sizes, bytes) of members added together, their
        # bytes copied (a piece they were read from is filled again)
        self._parts: list[tuple[list[str], list[bytes] | None, list[int], list[int], bytes]] = []
        self._size = 0

    def add(self, path: str, name: bytes, data: bytes | memoryview) -> None:
        self._add_part([path], [name], [0], [len(data)], bytes(data))

    def add_span(self, paths: list[str], starts: list[int], sizes: list[int], span: memoryview) -> None:
        """Many members whose tar names are their paths' UTF-8 (a plain run's), member i at starts[i] in span: a
        span large enough for a search of its own is searched where it lies (no copy) once those before it are,
        a smaller one copied in one."""
        if len(span) < SPAN_ALONE:
            self._add_part(paths, None, starts, sizes, bytes(span))
            return
        self.flush()  # the inspector sees members in archive order
        self._parts.append((paths, None, starts, sizes, span))
        self._size += len(span)
        self.flush()

    def _add_part(self, paths: list[str], names: list[bytes] | None, starts: list[int], sizes: list[int],
                  data: bytes) -> None:  # fmt: skip
        self._parts.append((paths, names, starts, sizes, data))
        self._size += len(data)
        if self._size >= BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._parts:
            return
        parts, self._parts, self._size = self._parts, [], 0
        if not self._prefilter(parts[0][4] if len(parts) == 1 else b"".join(part[4] for part in parts)):
            return
        for paths, names, starts, sizes, data in parts:
            for i, (path, start, size) in enumerate(zip(paths, starts, sizes, strict=True)):
                if size:
                    name = path.encode() if names is None else names[i]
                    self._scan.inspect_whole(path, name, memoryview(data)[start : start + size])


def _lone_members(run: PlainRun, paths: list[str | None]) -> list[int]:
    """Where in a run the members are that the scan reads as lone ones: a name to check (None in paths), a folder,
    a file of RUN_MEMBER or more; in order. Each is looked for only where one is (most runs hold none)."""
    lone = set()
    if None in paths:
        lone.update(i for i, path in enumerate(paths) if path is None)
    if "dir" in run.kinds:
        lone.update(i for i, kind in enumerate(run.kinds) if kind != "file")
    if max(run.sizes) >= RUN_MEMBER:
        lone.update(i for i, size in enumerate(run.sizes) if size >= RUN_MEMBER)
    return sorted(lone)


def _plain_paths(names: bytes, count: int, nest: bool) -> list[str | None]:
    """The catalog paths of a run's count names (each followed by a NUL: tar names hold none) where a name needs
    nothing but decoding: UTF-8, not absolute, no './' to drop, no '..' anywhere, not a pyvenv.cfg, and (nest)
    not named as an archive may be; None for any other (member_path and _record's checks judge it). All are
    checked and decoded at once where none is odd."""
    odd = b".." in names or b"pyvenv.cfg" in names or b"\0/" in names or b"\0./" in names or names[:1] == b"/"
    try:
        paths = None if odd or names[:2] == b"./" else names.decode("utf-8").split("\0", count)[:count]
    except UnicodeDecodeError:
        paths = None
    if paths is None:
        return [_plain_path(name, nest) for name in names.split(b"\0", count)[:count]]
    if nest and _may_name_an_archive(names, paths):
        return [None if might_be_archive(path) else path for path in paths]
    return paths


ARCHIVE_ENDINGS = {name[name.rfind(".") :] for name in ARCHIVE_NAMES}  # a name ending in none may not be an archive
# a name ending in one of them, in names each followed by a NUL (ASCII letters in any case)
_ARCHIVE_ENDING = re.compile(b"(?:%s)\0" % b"|".join(re.escape(e.encode()) for e in ARCHIVE_ENDINGS), re.I)


def _may_name_an_archive(names: bytes, paths: list[str]) -> bool:
    """Whether any of a run's names ends as an archive's may (names: each followed by a NUL; paths: their text):
    one search of them all where they are ASCII, else each one's last ending lowered as might_be_archive does."""
    if names.isascii():
        return _ARCHIVE_ENDING.search(names) is not None
    return not ARCHIVE_ENDINGS.isdisjoint(ending.lower() for ending in {p[p.rfind(".") :] for p in paths})


def _plain_path(name: bytes, nest: bool) -> str | None:
    """_plain_paths for one name."""
    if name[:1] == b"/" or name[:2] == b"./" or b".." in name or name.endswith(b"pyvenv.cfg"):
        return None
    try:
        path = name.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if nest and might_be_archive(path) else path


def _hashed_whole(data, beside: PieceThread | None) -> PieceHasher:
    h = PieceHasher(beside=beside)
    h.update(data)
    return h


def _ready(record: MemberRecord) -> bool:
    return not isinstance(record.blake3, HashJob) or record.blake3.done


def _hashed(record: MemberRecord) -> MemberRecord:
    """The record with its member's hash and piece hashes, once the thread hashing it is done."""
    h = record.blake3
    if isinstance(h, (HashJob, PieceHasher)):
        return record._replace(blake3=h.hexdigest(), pieces=h.pieces())
    return record


def _many_frames(fh: BinaryIO) -> bool:
    head = fh.read(32)
    size = fh.seek(0, 2)
    fh.seek(0)
    return looks_multi_frame(head, size)


def _finish_after_error(stream: ThreadedFrameStream, fh: BinaryIO, on_compressed: Callable[[bytes], None]) -> None:
    """A damaged archive is still hashed whole, so a later verify can tell whether it changed again: let the
    decompressing thread run to the end (tar damage), or read the rest of the file here (zstd damage)."""
    with contextlib.suppress(ZstdFormatError):
        stream.drain()
    stream.close()
    while chunk := fh.read(1 << 20):
        on_compressed(chunk)
