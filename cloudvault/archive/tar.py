"""Tar headers read from a forward-only stream: v7, ustar, star, GNU and old-GNU (long names, base-256 numbers,
sparse members), pax (local and global, GNU sparse 0.0/0.1/1.0); every field read defensively."""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, Protocol

from cloudvault.archive import sparse
from cloudvault.archive.numbers import parse_number  # sparse maps read it too: it sits below both

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
    b"S": "file",  # old-GNU sparse: a regular file whose map is in the header
    b"D": "dir",  # GNU incremental dumpdir: a directory, its data the listing of its names
    b"V": "label",  # GNU volume label
}
LONG_NAME, LONG_LINK, PAX, PAX_GLOBAL, SOLARIS_PAX = b"L", b"K", b"x", b"g", b"X"
DamageHandler = Callable[[str, int, str], None]


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
    sparse: list[tuple[int, int]] | None  # a sparse member's pieces (offset, length); size is the expanded size
    problems: tuple[str, ...]  # fields that could not be read, as GNU tar would report them


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
    field = block[148:156]
    try:  # GNU tar and Python's tarfile write six octal digits, a NUL and a space: read without a failed int()
        stored = int(field[:6], 8) if field[6:] == b"\0 " and field[:6].isdigit() else number(field)
    except ValueError:
        return False
    if stored == byte_sum(block) - sum(block[148:156]) + 8 * 32:
        return True
    return stored == sum(SIGNED_BYTES.unpack(block)) + 8 * 32


def cstring(field: bytes) -> bytes:
    return field.split(b"\0", 1)[0]


def parse_pax(data: bytes) -> tuple[list[tuple[bytes, bytes]], str | None]:
    """pax records 'LEN key=value\\n' (LEN counting the whole record), in order, checked as GNU tar checks them:
    (the records read, what is wrong with the first malformed one, or None)."""
    records, i, n = [], 0, len(data)
    while i < n:
        space = data.find(b" ", i, i + 24)
        digits = data[i:space] if space > i else b""
        if not digits.isdigit() or not digits.isascii():
            return records, f"pax record at byte {i}: missing length"
        end = i + int(digits)
        if end > n or end <= space + 1:
            return records, f"pax record at byte {i}: length {int(digits)} out of range"
        if data[end - 1] != 0x0A:
            return records, f"pax record at byte {i}: missing newline"
        key, eq, value = data[space + 1 : end - 1].partition(b"=")
        if not eq:
            return records, f"pax record at byte {i}: missing equal sign"
        records.append((key, value))
        i = end
    return records, None


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


MAX_INT = (1 << 63) - 1  # what the catalog (SQLite) can hold


def _pax_int(value: bytes) -> int | None:
    return int(value) if value.isdigit() and value.isascii() and int(value) <= MAX_INT else None


PAX_TIME = re.compile(rb"(-?)([0-9]+)(?:\.([0-9]*))?")


def _pax_time(value: bytes) -> int | None:
    """Whole seconds (floored) of a pax time: [-]digits[.digits], read as GNU tar's decode_timespec reads it
    (what follows the number is ignored; no digits at all is an error)."""
    m = PAX_TIME.match(value)
    if m is None:
        return None
    sign, whole, frac = m.groups()
    seconds = -int(whole) - (1 if frac and frac.strip(b"0") else 0) if sign else int(whole)
    return seconds if -MAX_INT <= seconds <= MAX_INT else None


def _apply_pax(records: list[tuple[bytes, bytes]], fields: dict, problems: list[str]) -> None:
    """pax records over the header's fields; a value that cannot be read is a problem, the header's value kept."""
    for key, value in records:
        if key == b"path":
            fields["name"] = value
        elif key == b"linkpath":
            fields["linkname"] = value
        elif key in (b"size", b"uid", b"gid"):
            number = _pax_int(value)
            if number is None:
                problems.append(f"pax {key.decode()}={value[:40]!r} is not a number")
            else:
                fields[key.decode()] = number
                fields.setdefault("overridden", set()).add(key.decode())
        elif key in (b"mtime", b"atime", b"ctime"):
            seconds = _pax_time(value)
            if seconds is None:
                problems.append(f"pax {key.decode()}={value[:40]!r} is not a time")
            elif key == b"mtime":
                fields["mtime"] = seconds
                fields.setdefault("overridden", set()).add("mtime")
        elif key in (b"uname", b"gname"):
            fields[key.decode()] = value.decode("utf-8", "replace")


# name mode uid gid size mtime chksum typeflag linkname magic+version uname gname devmajor devminor prefix
HEADER = struct.Struct("100s8s8s8s12s12s8sc100s8s32s32s8s8s155s12x")
FIELDS = ("name", "mode", "uid", "gid", "size", "mtime", "typeflag", "linkname", "uname", "gname")
NUMERIC = ("mode", "uid", "gid", "size", "mtime")


def number(field: bytes) -> int:
    """parse_number, with the common case (octal digits, then NULs or spaces) taken first."""
    try:
        return int(field.rstrip(b"\0"), 8)
    except ValueError:
        return parse_number(field)


def header_fields(block: bytes) -> tuple:
    """The header's fields in FIELDS order (one unpack: this runs once per member), and the names of the numeric
    fields that could not be read (given as 0)."""
    name, mode, uid, gid, size, mtime, _, typeflag, link, magic, uname, gname, _, _, prefix = HEADER.unpack(block)
    name = name.split(b"\0", 1)[0]
    if magic[:6] == b"ustar\0":  # POSIX ustar: a prefix joins the name; GNU uses that space otherwise
        if block[508:512] == b"tar\0":  # star: a shorter prefix, then atime and ctime
            prefix = prefix[:131]
        prefix = prefix.split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    bad = ()
    try:  # the common case, all five octal at once (one call each costs more than the parse)
        numbers = [int(f.rstrip(b"\0"), 8) for f in (mode, uid, gid, size, mtime)]
        if min(numbers) < 0 or b"_" in block[100:148] or b"+" in block[100:148]:
            raise ValueError  # a sign or an underscore that int() took, GNU tar does not: read each field strictly
    except ValueError:
        numbers, bad = [], []
        for what, f in zip(NUMERIC, (mode, uid, gid, size, mtime), strict=True):
            try:
                value = parse_number(f)
            except ValueError:
                value = None
            if value is None or not -MAX_INT <= value <= MAX_INT or (what == "size" and value < 0):
                bad.append(what)
                value = 0
            numbers.append(value)
    mode, uid, gid, size, mtime = numbers
    fields = (name, mode, uid, gid, size, mtime, typeflag, link.split(b"\0", 1)[0],
              uname.split(b"\0", 1)[0].decode("utf-8", "replace"), gname.split(b"\0", 1)[0].decode("utf-8", "replace"))
    return fields, bad


class _Extensions:
    """GNU long-name/long-link records and pax headers read so far, applied to the next real header."""

    def __init__(self) -> None:
        self.global_pax: list[tuple[bytes, bytes]] = []
        self.reset()

    def reset(self) -> None:
        self.pending = False  # whether anything was absorbed since the last member (most have nothing)
        self.long_name: bytes | None = None
        self.long_link: bytes | None = None
        self.pax: list[tuple[bytes, bytes]] = []
        self.problems: list[str] = []

    def absorb(self, typeflag: bytes, data: bytes) -> None:
        self.pending = True
        if typeflag == LONG_NAME:
            self.long_name = cstring(data)
        elif typeflag == LONG_LINK:
            self.long_link = cstring(data)
        else:
            records, problem = parse_pax(data)
            (self.global_pax if typeflag == PAX_GLOBAL else self.pax).extend(records)
            if problem:
                self.problems.append(f"malformed {'global ' if typeflag == PAX_GLOBAL else ''}extended header: "
                                     f"{problem}")  # fmt: skip

    def apply(self, fields: dict, problems: list[str]) -> None:
        problems.extend(self.problems)
        _apply_pax(self.global_pax, fields, problems)
        _apply_pax(self.pax, fields, problems)
        paxed = {key for key, _ in self.pax} | {key for key, _ in self.global_pax}
        if self.long_name is not None and b"path" not in paxed:
            fields["name"] = self.long_name
        if self.long_link is not None and b"linkpath" not in paxed:
            fields["linkname"] = self.long_link

    def sparse_records(self) -> dict[bytes, list[bytes]]:
        """GNU.sparse.* records of this member, each key's values in order (format 0.0 repeats its keys)."""
        found: dict[bytes, list[bytes]] = {}
        for key, value in self.pax:
            if key.startswith(b"GNU.sparse."):
                found.setdefault(key[11:], []).append(value)
        return found


def _next_header(stream: Stream, first: bool, on_damage: DamageHandler | None) -> tuple | None:
    """The next header block and its fields; None at the end of the archive. A block that fails its checksum is
    damage: told to on_damage, the walk goes on at the next block that is a header (GNU tar's 'Skipping to next
    header'); without on_damage it raises."""
    header_offset = stream.pos
    block = stream.read(BLOCK)
    if len(block) < BLOCK:
        if not block and not first:
            return None  # no end-of-archive blocks: GNU tar reads such archives too
        raise TarFormatError("not_tar" if first else "truncated", header_offset, "archive ends inside a header")
    if block == ZERO_BLOCK:
        return None
    if checksum_ok(block):
        return block, *header_fields(block)
    if first or on_damage is None:
        raise TarFormatError("not_tar" if first else "corrupt_header", header_offset, "bad tar header checksum")
    on_damage("corrupt_header", header_offset, "bad tar header checksum; skipped to the next header")
    return _resync(stream)


def _find_header(stream: Stream) -> tuple | None:
    """(block, fields, unreadable) of the first block from the stream's next 512-byte boundary (counted
    from the archive's start) on that passes the header checksum, zero blocks and data passed over; None at the
    end: where a walk resumes in the middle of an archive."""
    pad = -stream.pos % BLOCK
    if pad and len(stream.read(pad)) < pad:
        return None
    while True:
        block = stream.read(BLOCK)
        if len(block) < BLOCK:
            return None
        if block != ZERO_BLOCK and checksum_ok(block):
            return block, *header_fields(block)


def _resync(stream: Stream) -> tuple | None:
    """The next block that passes the header checksum, or None at a zero block or the end."""
    while True:
        block = stream.read(BLOCK)
        if len(block) < BLOCK or block == ZERO_BLOCK:
            return None
        if checksum_ok(block):
            return block, *header_fields(block)


def _oldgnu_sparse(block: bytes, stream: Stream, stored: int, problems: list[str]) -> tuple[list | None, int]:
    """An old-GNU 'S' header's map: four pieces in the header, more in the extension blocks after it (read here,
    whatever their content, so the data is where it should be); (pieces or None if unreadable, expanded size)."""
    areas = [block[386:482]]
    extended = block[482]
    while extended:
        more = _read_exact(stream, BLOCK)
        areas.append(more[:504])
        extended = more[504]
    try:
        pieces = [piece for area in areas for piece in sparse.oldgnu_entries(area)]
        size = parse_number(block[483:495])
        sparse.check_map(pieces, size, stored)
    except ValueError as exc:
        problems.append(f"sparse map: {exc}")
        return None, stored
    return pieces, size


def _pax_sparse(ext: _Extensions, stream: Stream, fields: dict, problems: list[str]) -> tuple[list | None, int]:
    """A pax sparse member (GNU.sparse 0.0, 0.1 or 1.0): its map, read from the records or, for 1.0, from the start
    of the data (the blocks it takes are read here); the real name and size go into fields. (pieces or None
    when the map cannot be read, bytes of the data that are the pieces' bytes)."""
    records = ext.sparse_records()
    stored = fields["size"]

    def last(key: bytes) -> bytes | None:
        return records[key][-1] if key in records else None

    try:
        if last(b"major") == b"1" and last(b"minor") == b"0":
            pieces, used = _map_10(stream, stored)
            stored -= used
            size = sparse.decimal(last(b"realsize") or b"", "GNU.sparse.realsize")
        elif b"map" in records:
            pieces = sparse.pax_map_01(last(b"map"))
            size = sparse.decimal(last(b"size") or b"", "GNU.sparse.size")
        else:
            pieces = sparse.pax_map_00(records.get(b"offset", []), records.get(b"numbytes", []))
            size = sparse.decimal(last(b"size") or b"", "GNU.sparse.size")
        sparse.check_map(pieces, size, stored)
    except ValueError as exc:
        problems.append(f"sparse map: {exc}")
        return None, stored
    if b"name" in records:
        fields["name"] = last(b"name")
    fields["size"] = size
    return pieces, stored


def _map_10(stream: Stream, stored: int) -> tuple[list, int]:
    """The map at the start of a format 1.0 member's data, read a block at a time until it has all its lines."""
    head = _read_exact(stream, BLOCK)
    count = sparse.decimal(head.partition(b"\n")[0], "sparse map count")
    if 2 + 4 * count > stored:  # each piece takes two lines of at least two bytes
        raise sparse.SparseMapError(f"a map of {count} pieces does not fit the member's {stored} bytes")
    lines = head.count(b"\n")
    while lines < 1 + 2 * count:
        if len(head) >= stored:
            raise sparse.SparseMapError("the map runs past the member's data")
        block = _read_exact(stream, BLOCK)
        head += block
        lines += block.count(b"\n")
    return sparse.pax_map_10(head)


def _extended(block: bytes, fields: tuple, bad: tuple | list, ext: _Extensions, stream: Stream,
              problems: list[str]) -> tuple[tuple, int, list | None]:  # fmt: skip
    """A header's fields with the long-name and pax records before it applied, the bytes of data it stores, and
    a sparse member's map (its map blocks, old-GNU or pax 1.0, read here); what cannot be read goes to problems."""
    named = dict(zip(FIELDS, fields, strict=True))
    ext.apply(named, problems)
    overridden = named.pop("overridden", ())
    problems += [f"header field {field} unreadable" for field in bad if field not in overridden]
    typeflag = named["typeflag"]
    stored = 0 if typeflag == b"5" else named["size"]
    sparse_map = None
    if typeflag == b"S":
        sparse_map, named["size"] = _oldgnu_sparse(block, stream, stored, problems)
    elif _is_sparse(ext):
        sparse_map, stored = _pax_sparse(ext, stream, named, problems)  # 1.0: the pieces follow the map read here
    return tuple(named.values()), stored, sparse_map


def _is_sparse(ext: _Extensions) -> bool:
    return ext.pending and any(key.startswith(b"GNU.sparse.") for key, _ in ext.pax)


EXTENSIONS = (LONG_NAME, LONG_LINK, PAX, PAX_GLOBAL, SOLARIS_PAX)


def iter_members(stream: Stream, on_damage: DamageHandler | None = None, *, resume: bool = False,
                 runs: Callable[[Stream], Any] | None = None) -> Iterator[tuple[TarHeader, MemberData] | Any]:  # noqa: E501  # fmt: skip
    """Each member's header and a reader of its data; read the data before asking for the next member.
    on_damage(kind, offset, detail) hears of a header that cannot be read, and the walk goes on past it (without
    it, such damage raises TarFormatError); fields that cannot be read are the header's problems. resume: the
    stream starts somewhere inside the archive (after damage): the walk begins at the next header found there.
    runs: reads the plain members at the stream's position together where it can (archive/plainruns.py), asked
    wherever nothing read before applies to the next header; what it returns (a PlainRun) is yielded as it is,
    and where it returns None the next member is read here."""
    ext = _Extensions()
    first = not resume
    found = _find_header(stream) if resume else None  # the header the walk resumes at (read: it is behind)
    ext_offset = None  # where a member's long-name or pax records begin: its header in the tar sense
    read_view = getattr(stream, "read_view", stream.read_some)  # looked up once: this loop runs per member
    while True:
        if runs is not None and found is None and not ext.pending and not ext.global_pax and (run := runs(stream)):
            first = False
            yield run
            continue
        header_offset = stream.pos - BLOCK if found else stream.pos
        got, found = found or _next_header(stream, first, on_damage), None
        if ext_offset is None:
            ext_offset = header_offset
        if got is None:
            return
        first = False
        block, fields, bad = got
        name, mode, uid, gid, size, mtime, typeflag, linkname, uname, gname = fields
        if "size" in bad:
            _unreadable_size(on_damage, header_offset, name)
            ext.reset()
            ext_offset = None
            continue
        if typeflag == PAX_GLOBAL:
            ext_offset = None
        if typeflag in EXTENSIONS:
            data = _read_exact(stream, size)
            _read_exact(stream, -size % BLOCK)
            ext.absorb(typeflag, data)
            continue
        problems: list[str] = []
        sparse_map = None
        stored = 0 if typeflag == b"5" else size  # GNU tar skips the data of every type but a directory
        if ext.pending or ext.global_pax or bad or typeflag == b"S":
            fields, stored, sparse_map = _extended(block, fields, bad, ext, stream, problems)
            name, mode, uid, gid, size, mtime, _, linkname, uname, gname = fields
        kind = TYPES.get(typeflag, "other")
        if problems or name[-1:] == b"/":  # most members have neither: the type is the typeflag's
            kind = _kind(typeflag, name, sparse_map is None and any(p.startswith("sparse map") for p in problems))
        header = TarHeader(name, kind, 0 if kind in NO_SIZE else size, mode, mtime, uid, gid, uname, gname, linkname,
                           ext_offset, stream.pos, sparse_map, tuple(problems) if problems else ())  # fmt: skip
        data = MemberData(stream, stored, read_view)
        yield header, data
        if not _passed(data, stream, read_view, kind, stored):
            return
        if ext.pending:
            ext.reset()
        ext_offset = None


def _unreadable_size(on_damage: DamageHandler | None, header_offset: int, name: bytes) -> None:
    """A header whose size cannot be read: damage told to on_damage (the walk goes on at the next header), or
    raised without one."""
    if on_damage is None:
        raise TarFormatError("corrupt_header", header_offset, "unreadable number in tar header")
    on_damage("corrupt_header", header_offset, f"{_label(name)}: size field unreadable; skipped to the next header")


NO_SIZE = ("hardlink", "symlink", "dir", "label")
# types whose data GNU tar never reads (it seeks over what a size field names): a hardlink whose size is not zero
SEEKED_OVER = ("hardlink", "symlink", "chardev", "blockdev", "fifo", "label")


def _passed(data: MemberData, stream: Stream, read_view, kind: str, stored: int) -> bool:
    """The rest of the member's data and its padding passed over; False when the archive ends inside data GNU tar
    seeks over without reading (a hardlink's, whose size field is not zero): there it ends cleanly, as for GNU
    tar. TarFormatError when it ends inside any other data."""
    try:
        data.skip()
        _pass_padding(stream, read_view, -stored % BLOCK)
    except TarFormatError:
        if kind not in SEEKED_OVER:
            raise
        return False
    return True


def _pass_padding(stream: Stream, read_view, pad: int) -> None:
    """The zeros after a member's data up to the next block, passed over as views: no copy."""
    while pad:
        got = len(read_view(pad))
        if not got:
            raise TarFormatError("truncated", stream.pos, "archive ends inside a member")
        pad -= got


def _kind(typeflag: bytes, name: bytes, bad_map: bool) -> str:
    """The member's type; a regular type named with a trailing '/' is a directory (v7), as GNU tar reads it; a
    sparse member whose map cannot be read is 'other' (its stored bytes are not the file)."""
    if bad_map:
        return "other"
    kind = TYPES.get(typeflag, "other")
    if kind == "file" and name.endswith(b"/") and typeflag in (b"0", b"\0", b"7"):
        return "dir"
    return kind


def _label(name: bytes) -> str:
    return name.decode("utf-8", "backslashreplace")[:200]
