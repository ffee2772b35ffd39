"""Tar headers read from a forward-only stream: ustar, GNU (long names, base-256 numbers) and pax."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import NamedTuple, Protocol

BLOCK = 512
ZERO_BLOCK = bytes(BLOCK)
CHUNK = 1 << 20

TYPES = {
    b"0": "file",
    b"\0": "file",
    b"7": "file",
    b"1": "hardlink",
    b"2": "symlink",
    b"3": "chardev",
    b"4": "blockdev",
    b"5": "dir",
    b"6": "fifo",
    b"S": "sparse",
}
LONG_NAME, LONG_LINK, PAX, PAX_GLOBAL = b"L", b"K", b"x", b"g"


class TarFormatError(Exception):
    """The decompressed stream is not a tar archive, or a header is damaged."""

    def __init__(self, kind: str, offset: int, detail: str) -> None:
        self.kind = kind  # not_tar | corrupt_header | truncated
        self.offset = offset
        super().__init__(f"{detail} at offset {offset}")


class Stream(Protocol):
    pos: int

    def read(self, n: int) -> bytes: ...

    def read_some(self, n: int) -> bytes:
        """Up to n bytes, as many as come without joining pieces; b'' only at the end."""
        ...


class TarHeader(NamedTuple):
    """A member's header after long-name and pax records are applied; paths are raw bytes. (A named tuple: one
    is built per member, and a frozen dataclass costs several times more to build.)"""

    name: bytes
    type: str
    size: int
    mode: int
    mtime: int
    uid: int
    gid: int
    uname: str
    gname: str
    linkname: bytes
    header_offset: int
    data_offset: int


def parse_number(field: bytes) -> int:
    """An octal field, or GNU base-256 when the high bit of the first byte is set."""
    if field and field[0] & 0x80:
        value = int.from_bytes(field, "big") & ~(0x80 << (8 * (len(field) - 1)))
        return value - (1 << (8 * len(field) - 1)) if field[0] == 0xFF else value
    text = field.partition(b"\0")[0]
    try:
        return int(text, 8)  # int() itself skips the spaces tar pads with
    except ValueError:
        if text.strip(b" "):
            raise
        return 0


SIGNED_BYTES = struct.Struct("148b8x356b")  # a header's bytes as signed chars, the checksum field left out


def byte_sum(block: bytes) -> int:
    """sum(block) for a 512-byte block, in C: Adler-32 gives the sum modulo 65521 and the block read as one
    number gives it modulo 255 (256 = 1 mod 255); at most 512 * 255 = 130560, the sum is the one of its two
    candidates below 2 * 65521 that has the right remainder. (sum() makes 512 int objects: 2.6 us a header.)"""
    low = ((zlib.adler32(block) & 0xFFFF) - 1) % 65521
    if low + 65521 <= 255 * len(block) and (low + 65521) % 255 == int.from_bytes(block, "little") % 255:
        return low + 65521
    return low


def checksum_ok(block: bytes) -> bool:
    """The header checksum: the sum of its bytes with the checksum field read as spaces, as unsigned bytes (POSIX),
    or as signed ones (some old tars). The signed sum is only worked out when the unsigned one does not match."""
    try:
        stored = number(block[148:156])
    except ValueError:
        return False
    if stored == byte_sum(block) - sum(block[148:156]) + 8 * 32:
        return True
    return stored == sum(SIGNED_BYTES.unpack(block)) + 8 * 32


def cstring(field: bytes) -> bytes:
    return field.split(b"\0", 1)[0]


def parse_pax(data: bytes) -> dict[bytes, bytes]:
    """pax records: 'LEN key=value\\n', LEN counting the whole record."""
    records, i = {}, 0
    while i < len(data):
        space = data.index(b" ", i)
        length = int(data[i:space])
        if length <= 0:
            raise ValueError("pax record length")
        key, _, value = data[space + 1 : i + length - 1].partition(b"=")
        records[key] = value
        i += length
    return records


def _read_exact(stream: Stream, n: int) -> bytes:
    data = stream.read(n)
    if len(data) < n:
        raise TarFormatError("truncated", stream.pos, "archive ends inside a member")
    return data


class MemberData:
    """The data of the current member, readable once in chunks; the rest is skipped when the next is read."""

    def __init__(self, stream: Stream, size: int, read_view=None) -> None:
        self._stream = stream
        self.left = size
        self._read_view = read_view or getattr(stream, "read_view", stream.read_some)

    def chunks(self, chunk: int = CHUNK) -> Iterator[bytes]:
        """The data in pieces of at most chunk bytes, as the stream hands them over (no joining copies)."""
        while self.left:
            data = self._stream.read_some(min(chunk, self.left))
            if not data:
                raise TarFormatError("truncated", self._stream.pos, "archive ends inside a member")
            self.left -= len(data)
            yield data

    def views(self, chunk: int = CHUNK) -> Iterator[bytes | memoryview]:
        """Like chunks, but views into the stream's pieces where the stream offers them (no copy), each valid until
        the next read: for hashing."""
        while self.left:
            data = self._read_view(min(chunk, self.left))
            if not data:
                raise TarFormatError("truncated", self._stream.pos, "archive ends inside a member")
            self.left -= len(data)
            yield data

    def first_view(self, chunk: int = CHUNK) -> bytes | memoryview:
        """The first piece views() would give (the whole data of most small members), without a generator."""
        if not self.left:
            return b""
        data = self._read_view(min(chunk, self.left))
        if not data:
            raise TarFormatError("truncated", self._stream.pos, "archive ends inside a member")
        self.left -= len(data)
        return data

    def skip(self) -> None:
        if self.left:
            for _ in self.views():
                pass


def _apply_pax(pax: dict[bytes, bytes], fields: dict) -> None:
    if b"path" in pax:
        fields["name"] = pax[b"path"]
    if b"linkpath" in pax:
        fields["linkname"] = pax[b"linkpath"]
    for key in (b"size", b"uid", b"gid"):
        if key in pax:
            fields[key.decode()] = int(pax[key])
    if b"mtime" in pax:
        fields["mtime"] = int(float(pax[b"mtime"]))
    for key in (b"uname", b"gname"):
        if key in pax:
            fields[key.decode()] = pax[key].decode("utf-8", "replace")


# name mode uid gid size mtime chksum typeflag linkname magic+version uname gname devmajor devminor prefix
HEADER = struct.Struct("100s8s8s8s12s12s8sc100s8s32s32s8s8s155s12x")
FIELDS = ("name", "mode", "uid", "gid", "size", "mtime", "typeflag", "linkname", "uname", "gname")


def number(field: bytes) -> int:
    """parse_number, with the common case (octal digits, then NULs or spaces) taken first."""
    try:
        return int(field.rstrip(b"\0"), 8)
    except ValueError:
        return parse_number(field)


def _header_fields(block: bytes) -> tuple:
    """The header's fields in FIELDS order (one unpack: this runs once per member)."""
    name, mode, uid, gid, size, mtime, _, typeflag, link, magic, uname, gname, _, _, prefix = HEADER.unpack(block)
    name = name.split(b"\0", 1)[0]
    if magic[:6] == b"ustar\0":  # POSIX ustar: a prefix joins the name; GNU uses that space otherwise
        prefix = prefix.split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    try:  # the common case, all five octal at once (one call each costs more than the parse)
        mode, uid, gid, size, mtime = (int(f.rstrip(b"\0"), 8) for f in (mode, uid, gid, size, mtime))
    except ValueError:
        mode, uid, gid, size, mtime = (parse_number(f) for f in (mode, uid, gid, size, mtime))
    return (name, mode, uid, gid, size, mtime, typeflag, link.split(b"\0", 1)[0],
            uname.split(b"\0", 1)[0].decode("utf-8", "replace"), gname.split(b"\0", 1)[0].decode("utf-8", "replace"))


class _Extensions:
    """GNU long-name/long-link records and pax headers read so far, applied to the next real header."""

    def __init__(self) -> None:
        self.global_pax: dict[bytes, bytes] = {}
        self.reset()

    def reset(self) -> None:
        self.pending = False  # whether anything was absorbed since the last member (most have nothing)
        self.long_name: bytes | None = None
        self.long_link: bytes | None = None
        self.pax: dict[bytes, bytes] = {}

    def absorb(self, typeflag: bytes, data: bytes, header_offset: int) -> None:
        self.pending = True
        if typeflag == LONG_NAME:
            self.long_name = cstring(data)
        elif typeflag == LONG_LINK:
            self.long_link = cstring(data)
        else:
            try:
                (self.pax if typeflag == PAX else self.global_pax).update(parse_pax(data))
            except ValueError:
                raise TarFormatError("corrupt_header", header_offset, "bad pax record") from None

    def apply(self, fields: dict) -> None:
        if not self.pending and not self.global_pax:
            return
        _apply_pax(self.global_pax, fields)
        _apply_pax(self.pax, fields)
        if self.long_name is not None and b"path" not in self.pax:
            fields["name"] = self.long_name
        if self.long_link is not None and b"linkpath" not in self.pax:
            fields["linkname"] = self.long_link


def _header_block(stream: Stream, first: bool) -> tuple | None:
    """The fields of the next header block; None at the end of the archive."""
    header_offset = stream.pos
    block = stream.read(BLOCK)
    if len(block) < BLOCK:
        if not block and not first:
            return None  # no end-of-archive blocks: GNU tar reads such archives too
        raise TarFormatError("not_tar" if first else "truncated", header_offset, "archive ends inside a header")
    if block == ZERO_BLOCK:
        return None
    if not checksum_ok(block):
        raise TarFormatError("not_tar" if first else "corrupt_header", header_offset, "bad tar header checksum")
    try:
        return _header_fields(block)
    except ValueError:
        raise TarFormatError("corrupt_header", header_offset, "unreadable number in tar header") from None


def iter_members(stream: Stream) -> Iterator[tuple[TarHeader, MemberData]]:
    """Each member's header and a reader of its data; read the data before asking for the next member."""
    ext = _Extensions()
    first = True
    ext_offset = None  # where a member's long-name or pax records begin: its header in the tar sense
    read_view = getattr(stream, "read_view", stream.read_some)  # looked up once: this loop runs per member
    while True:
        header_offset = stream.pos
        if ext_offset is None:
            ext_offset = header_offset
        fields = _header_block(stream, first)
        if fields is None:
            return
        first = False
        name, mode, uid, gid, size, mtime, typeflag, linkname, uname, gname = fields
        if typeflag == PAX_GLOBAL:
            ext_offset = None
        if typeflag in (LONG_NAME, LONG_LINK, PAX, PAX_GLOBAL):
            data = _read_exact(stream, size)
            _read_exact(stream, -size % BLOCK)
            ext.absorb(typeflag, data, header_offset)
            continue
        if ext.pending or ext.global_pax:  # most members have no long-name or pax records
            named = dict(zip(FIELDS, fields, strict=True))
            ext.apply(named)
            name, mode, uid, gid, size, mtime, _, linkname, uname, gname = named.values()
        kind = TYPES.get(typeflag, "other")
        if kind in ("hardlink", "symlink", "dir"):
            size = 0
        header = TarHeader(name, kind, size, mode, mtime, uid, gid, uname, gname, linkname, ext_offset, stream.pos)
        data = MemberData(stream, size, read_view)
        yield header, data
        data.skip()
        pad = -size % BLOCK
        while pad:  # passed over as views: no copy
            got = len(read_view(pad))
            if not got:
                raise TarFormatError("truncated", stream.pos, "archive ends inside a member")
            pad -= got
        if ext.pending:
            ext.reset()
        ext_offset = None
