"""Zip archives (.zip, .whl, .jar, .conda) read through their central directory: every member's row, BLAKE3 and
piece hashes, and a frame table the read path enters by member.

Vault trusts the central directory (what `unzip -l` lists: names, sizes, methods, CRCs); each member's data is
found through its own local header, which must agree (a name, method or size that differs is flagged
`zip_header_mismatch`, and the member is listed as the central directory says). The frame table of a zip has one
frame per member with data: comp_offset is its local header, comp_size reaches the end of its compressed bytes,
raw_offset/raw_size place its data in the archive's "raw" space (members' data one after another, in file order),
which is where a member's data_offset points. A stored `.tar.zst` member (a .conda's info-*/pkg-* streams) is
read once more as a tar: its members get a path through it, and its zstd frames join the table past the zip's.
Any other member whose bytes are a tar (plain or compressed, any method) is read once more too (archive/nested.py).
"""

from __future__ import annotations

import bisect
import bz2
import lzma
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO, NamedTuple

import blake3
import zstandard

from cloudvault.archive.formats import BOMB_FLOOR, BOMB_RATIO, HEAD, ZIP_NAMES, nested_format
from cloudvault.archive.nested import Borrowed, MemberFile, carry_flags, through
from cloudvault.archive.paths import LinkChains, unsafe_reason
from cloudvault.archive.reader import MAX_WINDOW
from cloudvault.archive.reader import ZIP_LOCAL as LOCAL
from cloudvault.archive.scan import (
    BATCH_MEMBER,
    INSPECT_HEAD,
    ArchiveScan,
    Inspect,
    MemberRecord,
    ScanResult,
    _InspectBatch,
    member_path,
    nest,
)
from cloudvault.errors import IntegrityError
from cloudvault.models import Frame
from cloudvault.pieces import PIECE, PieceHasher
from cloudvault.tools.mirrorfs import text_path

CENTRAL = b"PK\x01\x02"
END = b"PK\x05\x06"
END64 = b"PK\x06\x06"
END64_LOCATOR = b"PK\x06\x07"
CHUNK = 1 << 20
MAX_LINK = 4096  # a symlink member's data is its target: longer is not a link any system makes
METHODS = {0: "stored", 8: "deflate", 12: "bzip2", 14: "lzma", 93: "zstd", 95: "xz"}
# methods APPNOTE names that vault does not read: a member in one is flagged with its name (`unread_method`)
UNREAD_METHODS = {1: "Shrink", 2: "Reduce", 3: "Reduce", 4: "Reduce", 5: "Reduce", 6: "Implode", 9: "Deflate64",
                  10: "PKWARE Implode", 18: "IBM TERSE", 19: "IBM LZ77", 20: "zstd (old)", 94: "MP3", 96: "JPEG",
                  97: "WavPack", 98: "PPMd", 99: "AES"}  # fmt: skip
UNIX = 3
S_IFMT, S_IFDIR, S_IFLNK = 0o170000, 0o040000, 0o120000
NESTED = ".tar.zst"  # a stored member of this name is read as an archive too (one level)
# what a member's own data can be flagged with (its hash is then not kept; catalog/flagged.py refuses its bytes)
MEMBER_DAMAGE = ("bad_crc", "bad_size", "corrupt_data", "zip_no_local_header")
# what a member vault does not read is flagged with (no damage: encrypted, or a method vault has no decoder for)
MEMBER_UNREAD = ("encrypted_member", "unsupported_method")


class ZipFormatError(Exception):
    """Damage that stops the read of a zip (or of one member): kind is the flag's and the status's kind."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


class Entry(NamedTuple):
    """One central directory record: what the zip says a member is."""

    name: bytes
    method: int
    flags: int
    crc: int
    comp_size: int
    size: int
    header_offset: int  # of its local header in the file (the prefix before the zip already added)
    system: int  # the host that made it (3: Unix, whose mode is in the external attributes' high half)
    external: int
    mtime: int
    header_name: bytes = b""  # the name field's own bytes, where name came from a Unicode Path field


def is_zip_name(path: str) -> bool:
    """Whether a mirror path is named as a zip-based archive (.zip, .whl, .jar, .conda)."""
    return path.lower().endswith(ZIP_NAMES)


def member_type(entry: Entry) -> tuple[str, int]:
    """(type, mode) of a member from its name and, when a Unix host made it, its external attributes."""
    unix = entry.external >> 16 if entry.system == UNIX else 0
    if entry.name.endswith(b"/") or (unix & S_IFMT) == S_IFDIR or entry.external & 0x10:
        return "dir", (unix & 0o7777) or 0o755
    if (unix & S_IFMT) == S_IFLNK:
        return "symlink", (unix & 0o7777) or 0o777
    return "file", (unix & 0o7777) or 0o644


# -- the central directory ------------------------------------------------------------------------------------
def central_directory(fh: BinaryIO, size: int) -> list[Entry]:
    """Every central directory record, in its order (ZipFormatError 'truncated' or 'not_zip' when its end record
    is missing or points outside the file)."""
    tail_at = max(0, size - (1 << 16) - 22)
    fh.seek(tail_at)
    tail = fh.read()
    at = tail.rfind(END)
    if at < 0 or len(tail) - at < 22:
        raise ZipFormatError("truncated", "no end of central directory record")
    _, _, _, _, count, cd_size, cd_offset, _ = struct.unpack("<4s4H2LH", tail[at : at + 22])
    end_at = tail_at + at
    if count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
        count, cd_size, cd_offset, end_at = _zip64_end(fh, end_at)
    prefix = end_at - cd_size - cd_offset  # bytes before the zip (a self-extractor's stub)
    if prefix < 0:
        raise ZipFormatError("truncated", f"central directory at {cd_offset} + {cd_size} runs past its end record")
    fh.seek(prefix + cd_offset)
    table = fh.read(cd_size)
    entries = list(_central_records(table, prefix))
    if len(entries) != count:
        raise ZipFormatError("corrupt_header", f"central directory holds {len(entries)} records, its end says {count}")
    return entries


def local_entries(fh: BinaryIO, size: int) -> list[Entry]:
    """The members a zip without its central directory (cut short) still holds whole, found by walking its local
    headers from the start; a member whose sizes follow its data (a data descriptor: a zip streamed through a pipe)
    is decoded to find where its data ends (deflate, bzip2). The walk ends at the first member that is cut, or
    stored with a data descriptor (nothing says where it ends)."""
    entries: list[Entry] = []
    pos = 0
    while pos + 30 <= size:
        fh.seek(pos)
        head = fh.read(30)
        if head[:4] != LOCAL:
            break
        _, flags, method, clock, date, crc, comp, usize, n, m = struct.unpack("<HHHHHLLLHH", head[4:30])
        name_extra = fh.read(n + m)
        extra = _extras(name_extra[n:])
        usize, comp, _ = _zip64_sizes(extra, usize, comp, 0)
        start = pos + 30 + n + m
        if flags & 8:
            found = _described(fh, start, method, 1 in extra)
            if found is None:
                break
            crc, comp, usize, after = found
            end = start + comp + after
        else:
            end = start + comp
        if end > size:
            break
        mtime = _unix_time(extra) or _dos_time(date, clock)
        entries.append(Entry(_unicode_path(name_extra[:n], extra), method, flags, crc, comp, usize, pos, 0, 0, mtime))
        pos = end
    return entries


def _described(fh: BinaryIO, start: int, method: int, zip64: bool) -> tuple[int, int, int, int] | None:
    """(CRC, compressed size, size, the data descriptor's length) of a member whose sizes follow its data: its
    deflate or bzip2 stream decoded to its end, then the descriptor there read and checked; None when not found."""
    if method not in (8, 12):
        return None
    d = zlib.decompressobj(-15) if method == 8 else bz2.BZ2Decompressor()
    fh.seek(start)
    fed = 0
    try:
        while not d.eof and (chunk := fh.read(CHUNK)):
            fed += len(chunk)
            while chunk and not d.eof:
                d.decompress(chunk, CHUNK)
                chunk = d.unconsumed_tail if method == 8 else b""
    except (zlib.error, OSError, EOFError):
        return None
    if not d.eof:
        return None
    comp = fed - len(d.unused_data)
    fh.seek(start + comp)
    tail = fh.read(24)
    body = tail[4:] if tail[:4] == b"PK\x07\x08" else tail
    shape = "<LQQ" if zip64 else "<LLL"
    if len(body) < struct.calcsize(shape):
        return None
    crc, described, size = struct.unpack_from(shape, body)
    if described != comp:
        return None
    return crc, comp, size, (len(tail) - len(body)) + struct.calcsize(shape)


def _zip64_end(fh: BinaryIO, end_at: int) -> tuple[int, int, int, int]:
    fh.seek(max(0, end_at - 20))
    locator = fh.read(20)
    if len(locator) < 20 or locator[:4] != END64_LOCATOR:
        raise ZipFormatError("corrupt_header", "zip64 values without a zip64 end record locator")
    (at,) = struct.unpack("<Q", locator[8:16])
    fh.seek(at)
    record = fh.read(56)
    if len(record) < 56 or record[:4] != END64:
        raise ZipFormatError("corrupt_header", f"no zip64 end record at offset {at}")
    count, cd_size, cd_offset = struct.unpack("<QQQ", record[32:56])
    return count, cd_size, cd_offset, end_at - 20 - (end_at - 20 - at)


def _central_records(table: bytes, prefix: int) -> Iterator[Entry]:
    pos = 0
    while pos + 46 <= len(table) and table[pos : pos + 4] == CENTRAL:
        (made, _, flags, method, dos_time, dos_date, crc, comp, size, n, m, k, _, _, external,
         offset) = struct.unpack("<HHHHHHLLLHHHHHLL", table[pos + 4 : pos + 46])  # fmt: skip
        extra = _extras(table[pos + 46 + n : pos + 46 + n + m])
        header_name = table[pos + 46 : pos + 46 + n]
        size, comp, offset = _zip64_sizes(extra, size, comp, offset)
        mtime = _unix_time(extra) or _dos_time(dos_date, dos_time)
        yield Entry(_unicode_path(header_name, extra), method, flags, crc, comp, size, prefix + offset, made >> 8,
                    external, mtime, header_name)  # fmt: skip
        pos += 46 + n + m + k


def _extras(extra: bytes) -> dict[int, bytes]:
    """A record's extra fields by tag (the first of each), as the zip format lays them out: tag, length, body."""
    fields: dict[int, bytes] = {}
    pos = 0
    while pos + 4 <= len(extra):
        tag, n = struct.unpack_from("<HH", extra, pos)
        fields.setdefault(tag, extra[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return fields


def _unicode_path(name: bytes, fields: dict[int, bytes]) -> bytes:
    """The member's name: the UTF-8 one of Info-ZIP's Unicode Path field (0x7075) when the field is for this very
    header name (its CRC says so), else the header's own bytes."""
    body = fields.get(0x7075)
    if body and len(body) > 5 and body[0] == 1 and struct.unpack("<L", body[1:5])[0] == zlib.crc32(name):
        return body[5:]
    return name


def _name_text(name: bytes, flags: int) -> str:
    """What a name says: UTF-8 when flagged or valid as such, else the CP437 the zip format means by default."""
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        return name.decode("utf-8" if flags & 0x800 else "cp437", "replace")


def _zip64_sizes(fields: dict[int, bytes], size: int, comp: int, offset: int) -> tuple[int, int, int]:
    """The 64-bit values of a zip64 extra field, in its order, for those the 32-bit fields mark 0xFFFFFFFF."""
    body = fields.get(0x0001)
    if body is None:
        return size, comp, offset
    values = list(struct.unpack(f"<{len(body) // 8}Q", body[: len(body) // 8 * 8]))
    if size == 0xFFFFFFFF and values:
        size = values.pop(0)
    if comp == 0xFFFFFFFF and values:
        comp = values.pop(0)
    if offset == 0xFFFFFFFF and values:
        offset = values.pop(0)
    return size, comp, offset


def _unix_time(fields: dict[int, bytes]) -> int | None:
    """The modification time of Info-ZIP's extended timestamp field (UTC), if the record has one."""
    body = fields.get(0x5455)
    return struct.unpack("<l", body[1:5])[0] if body and len(body) >= 5 and body[0] & 1 else None


def _dos_time(date: int, clock: int) -> int:
    """A DOS date and time (local time, as unzip sets it) as seconds since the epoch; 0 when it is no date."""
    fields = (1980 + (date >> 9), (date >> 5) & 15, date & 31, clock >> 11, (clock >> 5) & 63, (clock & 31) * 2)
    try:
        return int(time.mktime((*fields, 0, 0, -1)))
    except (OverflowError, ValueError):
        return 0


# -- members' data --------------------------------------------------------------------------------------------
def local_data_start(fh: BinaryIO, entry: Entry) -> tuple[int, list[str]]:
    """Where entry's compressed data starts, from its local header, and how that header disagrees with the
    central directory (name, method, CRC or sizes); ZipFormatError when there is no local header there."""
    fh.seek(entry.header_offset)
    head = fh.read(30)
    if len(head) < 30 or head[:4] != LOCAL:
        raise ZipFormatError("zip_no_local_header", f"no local header at offset {entry.header_offset}")
    _, flags, method, _, _, crc, comp, size, n, m = struct.unpack("<HHHHHLLLHH", head[4:30])
    name_extra = fh.read(n + m)
    extra = _extras(name_extra[n:])
    name = _unicode_path(name_extra[:n], extra)
    size, comp, _ = _zip64_sizes(extra, size, comp, 0)
    problems = []
    if name != entry.name and _name_text(name, flags) != _name_text(entry.name, entry.flags):
        problems.append(f"local header names it {name!r}")
    if method != entry.method:
        problems.append(f"local header says method {method}, the central directory {entry.method}")
    if (flags ^ entry.flags) & 1:  # which bytes does the mirror hold, plain or encrypted?
        local, central = ("encrypted", "plain") if flags & 1 else ("plain", "encrypted")
        problems.append(f"local header says {local}, the central directory {central}")
    if not flags & 8 and (crc, comp, size) != (entry.crc, entry.comp_size, entry.size):
        problems.append(f"local header says {size} bytes ({comp} compressed, CRC {crc:08x}), the central "
                        f"directory {entry.size} ({entry.comp_size}, CRC {entry.crc:08x})")  # fmt: skip
    return entry.header_offset + 30 + n + m, problems


def _bounded(fh: BinaryIO, start: int, length: int) -> Callable[[int], bytes]:
    """read(n) of the length bytes at start, and nothing past them."""
    left = [length]
    fh.seek(start)

    def read(n: int) -> bytes:
        data = fh.read(min(n, left[0])) if left[0] else b""
        left[0] -= len(data)
        return data

    return read


def _decompressor(method: int, read: Callable[[int], bytes]):
    if method == 8:
        return zlib.decompressobj(-15)
    if method == 12:
        return bz2.BZ2Decompressor()
    if method == 95:
        return lzma.LZMADecompressor(lzma.FORMAT_XZ)
    if method == 14:  # zip's LZMA: a version, the properties' length, the properties, then raw LZMA1
        head = read(4)
        props = read(struct.unpack("<H", head[2:4])[0]) if len(head) == 4 else b""
        if len(props) < 5:
            raise ZipFormatError("corrupt_data", "LZMA member cut short in its header")
        try:
            lzma1 = lzma._decode_filter_properties(lzma.FILTER_LZMA1, props)  # zipfile's own way in
            return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[lzma1])
        except (lzma.LZMAError, ValueError) as exc:
            raise ZipFormatError("corrupt_data", f"LZMA properties not usable: {exc}") from None
    raise ZipFormatError("unsupported_method", f"{method_name(method)} (method {method}): a compression method "
                         "vault does not read; its bytes are not handed out")  # fmt: skip


def method_name(method: int) -> str:
    """What a compression method is called: its name, or `method N` for one no one named."""
    return METHODS.get(method) or UNREAD_METHODS.get(method) or f"method {method}"


def unread_method(detail: str) -> str:
    """The method's name an `unsupported_method` flag's detail begins with (the index summary counts by it)."""
    return detail.split(" (method ", 1)[0]


def member_chunks(fh: BinaryIO, data_start: int, comp_size: int, method: int, size: int) -> Iterator[bytes]:
    """A member's data as extracted, in chunks of at most CHUNK: never more than size bytes (ZipFormatError
    'bad_size' when the data holds more or fewer, 'truncated' when its compressed bytes end first)."""
    read = _bounded(fh, data_start, comp_size)
    produced = 0
    for chunk in _decoded(method, read, size):
        produced += len(chunk)
        if produced > size:
            raise ZipFormatError("bad_size", f"its data holds more than the {size} bytes its size says")
        yield chunk
    if produced != size:
        raise ZipFormatError("bad_size", f"its data holds {produced} bytes, its size says {size}")


def _decoded(method: int, read: Callable[[int], bytes], size: int) -> Iterator[bytes]:
    if method == 0:
        while chunk := read(min(CHUNK, size + 1)):
            yield chunk
        return
    if method == 93:
        reader = zstandard.ZstdDecompressor().stream_reader(_Source(read), read_across_frames=True)
        try:
            while chunk := reader.read(CHUNK):
                yield chunk
        except zstandard.ZstdError as exc:
            raise ZipFormatError("corrupt_data", f"zstd data does not decode: {exc}") from None
        return
    d = _decompressor(method, read)
    produced = 0
    while not d.eof:
        if isinstance(d, bz2.BZ2Decompressor | lzma.LZMADecompressor):
            data = read(CHUNK) if d.needs_input else b""
        else:
            data = d.unconsumed_tail or read(CHUNK)
        try:
            out = d.decompress(data, CHUNK)
        except (zlib.error, OSError, EOFError, lzma.LZMAError) as exc:
            raise ZipFormatError("corrupt_data", f"{METHODS.get(method)} data does not decode: {exc}") from None
        produced += len(out)
        if out:
            yield out
        elif not data and produced == size:  # an LZMA stream without its end marker (7-Zip's) ends at the size
            return
        elif not data:
            raise ZipFormatError("corrupt_data", "its compressed bytes end before its data does")


class _Source:
    """A read(n) function as the file object zstandard's stream reader reads from."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self.read = read


# -- the scan -------------------------------------------------------------------------------------------------
class ZipScan:
    """One pass over a zip, in local header order: iterating yields a MemberRecord per central directory record
    (and per member of a stored .tar.zst member), `result` then holds the frames, the archive's BLAKE3 and pieces,
    the status and the flags, as ArchiveScan's does for a .tar.zst."""

    def __init__(self, fh: BinaryIO, *, inspect: Inspect | None = None, prefilter=None,
                 on_bytes: Callable[[int], None] | None = None, nested: bool = True) -> None:  # fmt: skip
        self._fh = fh
        self._inspect, self._prefilter = inspect, prefilter
        self._batch = _InspectBatch(prefilter, self) if inspect and prefilter else None
        self._on_bytes = on_bytes
        self._size = 0
        self._told = 0  # bytes of the file told to on_bytes so far: each member's compressed bytes as it is read
        self._nested = nested
        self._head = b""  # the first bytes of the member last hashed (formats.nested_format looks at them)
        self._chains = LinkChains()
        self.result = ScanResult(format="zip")

    def __iter__(self) -> Iterator[MemberRecord]:
        size = self._size = self._fh.seek(0, 2)
        try:
            entries = self._entries(size)
            refusal = _refusal(entries, size)
            if refusal:
                kind, detail = refusal
                self.result.status = "unsupported" if kind == "unsupported_format" else kind
                self.result.flag(kind, detail)
            yield from self._members(entries, read_data=refusal is None)
        finally:
            if self._batch:
                self._batch.flush()
            self._hash_file(size)

    def _entries(self, size: int) -> list[Entry]:
        """The central directory's records; of a zip without one, those its local headers still hold whole."""
        try:
            return central_directory(self._fh, size)
        except ZipFormatError as exc:
            self._fh.seek(0)
            head = self._fh.read(8)
            if len(head) == 8 and head[:4] == LOCAL and struct.unpack("<H", head[6:8])[0] & 0x2001:  # encrypted
                self.result.status = "unsupported"
                self.result.flag("unsupported_format", "encrypted zip (its central directory too)")
                return []
            if exc.kind != "truncated" or head[:4] != LOCAL:
                self._damage("not_zip" if exc.kind == "truncated" else exc.kind, f"{exc}: not a zip vault can read")
                return []
        entries = local_entries(self._fh, size)
        self._damage("truncated", f"no end of central directory record (cut short?): {len(entries)} members read "
                     "from their local headers")  # fmt: skip
        return entries

    def _progress(self, n: int) -> None:
        self._told += n
        if self._on_bytes and n:
            self._on_bytes(n)

    def _damage(self, kind: str, detail: str) -> None:
        if self.result.status == "ok":
            self.result.status = kind
        self.result.flag(kind, detail)

    def _members(self, entries: list[Entry], read_data: bool) -> Iterator[MemberRecord]:
        raw = 0
        nested: list[tuple[str, Entry, int]] = []
        archives: list[tuple[MemberRecord, str]] = []  # other members whose bytes are a tar: read once more (scan.nest)
        in_order = sorted(range(len(entries)), key=lambda i: (entries[i].header_offset, i))
        end_before = -1
        for i in in_order:
            entry = entries[i]
            path = member_path(entry.name)[0]
            overlaps = entry.header_offset < end_before
            if overlaps:
                self.result.flag("zip_overlap", f"its local header at {entry.header_offset} lies inside another "
                                 "member's bytes (a zip bomb's trick: one data, many names)", path)  # fmt: skip
            record, data_end = self._member(entry, raw, read_data and not overlaps)
            self._progress(max(0, min(data_end, self._size) - entry.header_offset) if not overlaps else 0)
            end_before = max(end_before, data_end)
            if record.type == "file":  # its place in the raw space whatever its state: offsets stay put
                if entry.size:
                    self.result.frames.append(Frame(entry.header_offset, data_end - entry.header_offset, raw,
                                                    entry.size))  # fmt: skip
                raw += entry.size
                if self._nested and record.blake3 and entry.method == 0 and record.path.endswith(NESTED):
                    nested.append((record.path, entry, data_end - entry.comp_size))
                elif self._nested and record.blake3 and (fmt := nested_format(self._head, record.path)):
                    archives.append((record, fmt))
            yield record
        self.result.raw_size = raw
        for path, entry, start in nested:
            yield from self._nested_members(path, entry, start)
        if archives:  # each read again through its own record: a zip is read at random anyway
            reader = ZipReader(Borrowed(self._fh), self.result.frames)
            files = [(rec, fmt, MemberFile(reader, rec.data_offset, rec.size)) for rec, fmt in archives]
            yield from nest(self.result, files, inspect=self._inspect, prefilter=self._prefilter)

    def _member(self, entry: Entry, raw: int, read_data: bool) -> tuple[MemberRecord, int]:
        """The record of one member and where its compressed bytes end; its data hashed (and checked against its
        CRC and size) when read_data and its local header agrees: a member vault cannot vouch for keeps no hash,
        so no read path (grep's small members included) finds bytes that match one."""
        path, raw_path = member_path(entry.name)
        kind, mode = member_type(entry)
        self.result.member_count += 1
        data_end = entry.header_offset + 30 + len(entry.name) + entry.comp_size
        digest = pieces = link = raw_link = None
        try:
            start, problems = local_data_start(self._fh, entry)
            data_end = start + entry.comp_size
            for problem in problems:
                self.result.flag("zip_header_mismatch", f"{problem} (vault lists what the central directory "
                                 "says; its bytes are not handed out)", path)  # fmt: skip
            if read_data and entry.flags & 1 and kind != "dir":
                self.result.flag("encrypted_member", _encryption(entry), path)
            elif read_data and not problems and kind != "dir":
                if kind == "symlink":
                    link, raw_link = self._link(entry, start, path)
                else:
                    digest, pieces = self._hash(entry, start, path)
        except ZipFormatError as exc:
            self.result.flag(exc.kind, str(exc), path)
        self._judge_path(path, kind, link, raw_path)
        record = MemberRecord(path, raw_path, kind, entry.size, mode, entry.mtime, 0, 0, "", "", link,
                              entry.header_offset, raw, digest, raw_link, None, pieces)  # fmt: skip
        return record, data_end

    def _judge_path(self, path: str, kind: str, link: str | None, raw_path: bytes | None) -> None:
        reason = unsafe_reason(path, kind, link)
        chained = self._chains.unsafe_reason(path, kind, link)
        if reason or chained:
            self.result.flag("unsafe_member", reason or chained, path)
        if raw_path is not None and text_path(raw_path)[1] is not None:
            self.result.flag("non_utf8_name", "member name is not valid UTF-8 (raw bytes kept)", path)

    def _link(self, entry: Entry, start: int, path: str) -> tuple[str | None, bytes | None]:
        if entry.size > MAX_LINK:
            raise ZipFormatError("corrupt_data", f"symlink member of {entry.size} bytes: no link is that long")
        target = b"".join(self._checked(entry, start))
        return text_path(target)

    def _checked(self, entry: Entry, start: int) -> Iterator[bytes]:
        """The member's data as extracted, its CRC checked at the end (ZipFormatError 'bad_crc')."""
        crc = 0
        for chunk in member_chunks(self._fh, start, entry.comp_size, entry.method, entry.size):
            crc = zlib.crc32(chunk, crc)
            yield chunk
        if crc != entry.crc:
            raise ZipFormatError("bad_crc", f"its data's CRC is {crc:08x}, the zip says {entry.crc:08x}")

    def _hash(self, entry: Entry, start: int, path: str) -> tuple[str, bytes | None]:
        """BLAKE3 and piece hashes of a member's data, shown to the inspector as they pass; a member whose data
        does not check out (CRC, size) keeps no hash: nothing can verify it."""
        inspector = None
        h = PieceHasher() if entry.size > PIECE else blake3.blake3()
        self._head = b""
        for chunk in self._checked(entry, start):
            h.update(chunk)
            self._head = self._head or chunk[:HEAD]
            if self._inspect is None:
                continue
            if len(chunk) == entry.size and self._batch is not None and entry.size <= BATCH_MEMBER:
                self._batch.add(path, entry.name, chunk)
                continue
            if inspector is None:
                inspector = self._inspect(entry.name, entry.size, chunk[:INSPECT_HEAD]) or False
            if inspector:
                inspector.feed(chunk)
        self.flag_findings(path, inspector or None)
        return h.hexdigest(), h.pieces() if isinstance(h, PieceHasher) else None

    def inspect_whole(self, path: str, name: bytes, data: bytes | memoryview) -> None:
        """Show a member's bytes, all at hand, to an inspector (if one wants them): the batch's way back in."""
        inspector = self._inspect(name, len(data), bytes(data[:INSPECT_HEAD]))
        if inspector:
            inspector.feed(bytes(data))
            self.flag_findings(path, inspector)

    def flag_findings(self, path: str, inspector) -> None:
        if inspector:
            for kind, detail in inspector.findings():
                self.result.flag(kind, detail, path)

    def _nested_members(self, outer: str, entry: Entry, start: int) -> Iterator[MemberRecord]:
        """The members of a stored .tar.zst member, as members with a path through it; its frames join the table
        past everything before (one level: what it holds is not opened again)."""
        base = self.result.raw_size
        inner = ArchiveScan(_Window(self._fh, start, entry.comp_size), inspect=self._inspect, prefilter=self._prefilter,
                            nested=False)  # fmt: skip
        for rec in inner:
            self.result.member_count += 1
            yield through(outer, rec, base)
        found = inner.result
        carry_flags(self.result, found, outer)
        self.result.frames += [Frame(start + f.comp_offset, f.comp_size, base + f.raw_offset, f.raw_size)
                               for f in found.frames]  # fmt: skip
        self.result.raw_size = base + found.raw_size

    def _hash_file(self, size: int) -> None:
        """The archive file's own BLAKE3 and piece hashes (a zip is read at random: its bytes once more)."""
        h = PieceHasher()
        self._fh.seek(0)
        while chunk := self._fh.read(CHUNK):
            h.update(chunk)
        self.result.blake3, self.result.pieces = h.hexdigest(), h.pieces()
        self._progress(max(0, size - self._told))  # what the members' compressed bytes did not account for


def _refusal(entries: list[Entry], size: int) -> tuple[str, str] | None:
    """Why the members' data is not read at all: a wholly encrypted zip (every member with data is: a format vault
    does not open; one only partly so is read member by member), or a zip bomb (declared sizes past BOMB_RATIO
    times the file and BOMB_FLOOR); None to read them."""
    encrypted = sum(1 for e in entries if e.flags & 1)
    if encrypted and all(e.flags & 1 for e in entries if member_type(e)[0] != "dir"):
        return "unsupported_format", f"encrypted zip ({encrypted} of {len(entries)} members encrypted)"
    declared = sum(e.size for e in entries)
    if declared > max(BOMB_FLOOR, BOMB_RATIO * size):
        return "zip_bomb", (f"zip bomb refused: {declared:,} bytes declared from a {size:,}-byte file (more than "
                            f"{BOMB_RATIO}x and {BOMB_FLOOR >> 30} GiB); no member was decompressed")  # fmt: skip
    return None


def _encryption(entry: Entry) -> str:
    """What an encrypted member's flag says: how it is encrypted, and that vault cannot read it."""
    how = ("WinZip AES (AE-x)" if entry.method == 99 else "PKWARE strong encryption" if entry.flags & 0x40
           else "traditional PKWARE (ZipCrypto)")  # fmt: skip
    return f"encrypted with {how}: vault cannot read it without its password; its bytes are not handed out"


class _Window:
    """A range of a file as a file of its own (a stored member read as an archive)."""

    def __init__(self, fh: BinaryIO, start: int, length: int) -> None:
        self._fh, self._start, self._length, self._pos = fh, start, length, 0

    def read(self, n: int = -1) -> bytes:
        n = self._length - self._pos if n < 0 else min(n, self._length - self._pos)
        self._fh.seek(self._start + self._pos)
        data = self._fh.read(n) if n > 0 else b""
        self._pos += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else (self._pos + offset if whence == 1 else self._length + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos


# -- the read path --------------------------------------------------------------------------------------------
def is_record(fh: BinaryIO, frame: Frame) -> bool:
    """Whether a frame of a recorded table is a zip member's local record (else a zstd frame)."""
    return record_method(fh, frame) is not None


def record_method(fh: BinaryIO, frame: Frame) -> int | None:
    """The compression method of the member whose local record a frame is; None when it is none (a zstd frame)."""
    fh.seek(frame.comp_offset)
    head = fh.read(10)
    return struct.unpack("<H", head[8:10])[0] if len(head) == 10 and head[:4] == LOCAL else None


def record_chunks(fh: BinaryIO, frame: Frame, *, check_crc: bool = False, skip: int = 0) -> Iterator[bytes]:
    """The data of the member whose local record a frame is, decoded by the method its local header names
    (ZipFormatError when it does not check out: a refused member's record is never read, see catalog/flagged.py);
    check_crc: against the local header's CRC too, where it has one (the read path checks pieces instead); skip:
    of a stored member, the bytes not wanted, sought over (the data starts skip bytes in; no CRC then)."""
    fh.seek(frame.comp_offset)
    head = fh.read(30)
    if len(head) < 30 or head[:4] != LOCAL:
        raise ZipFormatError("zip_no_local_header", f"no local header at offset {frame.comp_offset}")
    _, flags, method, _, _, expected, _, _, n, m = struct.unpack("<HHHHHLLLHH", head[4:30])
    start = frame.comp_offset + 30 + n + m
    if skip and method == 0:
        yield from member_chunks(fh, start + skip, frame.comp_offset + frame.comp_size - start - skip, 0,
                                 frame.raw_size - skip)  # fmt: skip
        return
    crc = 0
    for chunk in member_chunks(fh, start, frame.comp_offset + frame.comp_size - start, method, frame.raw_size):
        if check_crc:
            crc = zlib.crc32(chunk, crc)
        yield chunk
    if check_crc and not flags & 8 and crc != expected:
        raise ZipFormatError("bad_crc", f"its data's CRC is {crc:08x}, its local header says {expected:08x}")


class RecordReader:
    """read(n) over a member's data decoded from its local record held in memory (the mount's frame cache)."""

    def __init__(self, comp: bytes, raw_size: int) -> None:
        import io

        self._chunks = record_chunks(io.BytesIO(comp), Frame(0, len(comp), 0, raw_size))
        self._held = memoryview(b"")

    def read(self, n: int = -1) -> bytes:
        try:
            return next(self._chunks, b"")
        except ZipFormatError as exc:
            raise IntegrityError(detail=f"damaged zip member: {exc}") from None

    def readinto(self, buf) -> int:
        """As a zstd stream reader's: up to len(buf) decoded bytes into buf, 0 at the end."""
        if not self._held:
            self._held = memoryview(self.read())
        n = min(len(buf), len(self._held))
        buf[:n] = self._held[:n]
        self._held = self._held[n:]
        return n


class ZipReader:
    """Forward reads of a zip's raw space (see the module's docstring) through its recorded frame table: a frame
    that is a member's local record is decompressed by its own method, one of a stored .tar.zst by zstd; a read
    goes on in the frame it is in, and enters the frame of any other place afresh."""

    def __init__(self, fh: BinaryIO, frames: list[Frame], on_data: Callable[[int], None] | None = None) -> None:
        self._fh = fh
        self._frames = frames
        self._starts = [f.raw_offset for f in frames]
        self._on_data = on_data
        self._methods: dict[int, int | None] = {}  # frame index -> its member's method (None: a zstd frame)
        self._index = -1  # the frame being read, and where in the raw space
        self._pos = 0
        self._stream: Iterator[bytes] | None = None
        self._held = b""
        self.frames_read = 0
        self.bytes_decompressed = 0

    def close(self) -> None:
        self._fh.close()

    def chunks(self, offset: int, size: int) -> Iterator[bytes]:
        end = offset + size
        while offset < end:
            i = bisect.bisect_right(self._starts, offset) - 1
            frame = self._frames[i] if i >= 0 else None
            if frame is None or frame.raw_offset + frame.raw_size <= offset:
                raise IntegrityError(detail="the archive ends before the member's end")
            stop = min(end, frame.raw_offset + frame.raw_size)
            if i != self._index or offset < self._pos:
                self._enter(i, offset)
            yield from self._read(offset, stop)
            offset = stop

    def _enter(self, i: int, offset: int) -> None:
        frame = self._frames[i]
        self._index, self._pos, self._held = i, frame.raw_offset, b""
        self.frames_read += 1
        method = self._method(i)
        if method == 0:  # stored: entered right where the bytes wanted are
            self._pos = offset
            self._stream = self._member(frame, offset - frame.raw_offset)
        elif method is not None:
            self._stream = self._member(frame)
        else:
            self._fh.seek(frame.comp_offset)
            reader = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW).stream_reader(self._fh, closefd=False)
            self._stream = iter(lambda: reader.read(CHUNK), b"")

    def _method(self, i: int) -> int | None:
        """The compression method of the member whose local record frame i is; None for a zstd frame."""
        if i not in self._methods:
            self._methods[i] = record_method(self._fh, self._frames[i])
        return self._methods[i]

    def _member(self, frame: Frame, skip: int = 0) -> Iterator[bytes]:
        try:
            yield from record_chunks(self._fh, frame, skip=skip)
        except ZipFormatError as exc:
            raise IntegrityError(detail=f"damaged zip member: {exc}; nothing was written") from None

    def _read(self, offset: int, stop: int) -> Iterator[bytes]:
        while self._pos < stop:
            data = self._held or next(self._stream, b"")
            self._held = b""
            if not data:
                raise IntegrityError(detail=f"archive ends {stop - self._pos} bytes before the member's end")
            skip = max(0, offset - self._pos)
            take = min(len(data), stop - self._pos)
            if take < len(data):
                self._held = data[take:]
            self._pos += take
            self.bytes_decompressed += take
            if skip < take:
                if self._on_data:
                    self._on_data(take - skip)
                yield data[skip:take]
