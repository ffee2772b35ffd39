"""Plain tar members read together where they lie whole in one decoded piece: most members of most archives.

A plain member is a file or folder whose header passes its checksum, with every field readable, no '/' ending a
file's name, and no long-name or pax record before it. `PlainRuns` is what `tar.iter_members` asks (its `runs`)
wherever nothing read before applies to the next header: from the stream's position it finds the headers that
look plain by their type and size alone, checks them all, and hands back the run of those that are (a PlainRun),
with the piece their data lie in, so that a scan hashes and records them in one loop instead of a walk step, a
reader and a record per member. The first header that is not plain ends a run; the walk reads it as it reads any.
Where the native extension is built (cloudvault/_plainruns.c), a run's headers are read there, in one call, in the
canonical forms headerarrays.py reads; elsewhere (or where the first header is plain in another form) a long run is
checked and read as one array (archive/headerarrays.py, numpy, imported once a walk has met enough plain members to
pay for it) and a short one header by header with tar.py's own checks.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from cloudvault.archive.tar import BLOCK, ZERO_BLOCK, MemberData, Stream, TarHeader, checksum_ok, cstring, header_fields

try:
    from cloudvault import _plainruns
except ImportError:  # not built (no C compiler where it was installed): runs read by numpy and tar.py
    _plainruns = None

PLAIN = {b"0": "file", b"\0": "file", b"7": "file", b"5": "dir"}  # the typeflags of plain members
SIZE_AND_TYPE = struct.Struct("124x12s20xc")  # a header's size field and typeflag, read in one call
ARRAY_RUN = 64  # a run of this many headers or more is read as one array ...
ARRAY_AFTER = 40_000  # ... once a walk has met this many plain members (numpy's import, ~0.1 s, then pays)
NATIVE = _plainruns is not None  # runs read by the extension


class PlainRun(NamedTuple):
    """Plain members read together, as columns (one entry a member, no header made for a member the scan takes as
    it is): their names (and all of them each followed by a NUL, to be decoded at once), types, sizes, numbers,
    owners and header offsets; and the piece their data lie in (a member's data start a block after its header),
    whose first byte is at stream offset base. Its views are valid until the walk is asked for what follows."""

    names: list[bytes]
    joined_names: bytes
    kinds: list[str]
    sizes: list[int]
    modes: list[int]
    mtimes: list[int]
    uids: list[int]
    gids: list[int]
    unames: list[str]
    gnames: list[str]
    offsets: list[int]
    piece: memoryview
    base: int

    def header(self, i: int) -> TarHeader:
        """Member i's header, as the walk makes one for a lone member."""
        at = self.offsets[i]
        return TarHeader(self.names[i], self.kinds[i], self.sizes[i], self.modes[i], self.mtimes[i], self.uids[i],
                         self.gids[i], self.unames[i], self.gnames[i], b"", at, at + BLOCK, None, ())  # fmt: skip

    def member_data(self, i: int) -> MemberData:
        """Member i's data, read as a lone member's is."""
        at = self.offsets[i] + BLOCK - self.base
        return MemberData(_Held(self.piece[at : at + self.sizes[i]]), self.sizes[i])


class _Held:
    """Data held whole as one view, read as a stream (MemberData's source for a member of a PlainRun)."""

    def __init__(self, view: memoryview) -> None:
        self._view, self.pos = view, 0

    def read_view(self, n: int) -> memoryview:
        view = self._view[self.pos : self.pos + n]
        self.pos += len(view)
        return view

    def read_some(self, n: int) -> bytes:
        return bytes(self.read_view(n))


class PlainRuns:
    """The plain members at a stream's position, for one walk (tar.iter_members' runs). Where the headers that
    look plain are not (another writer's form, damage), runs are not tried again until the walk is past them, so
    that they are looked at once, not once per member. arrays_after: plain members met before long runs are
    read as arrays (ARRAY_AFTER); native: runs read by the extension (NATIVE: where it is built)."""

    def __init__(self, arrays_after: int | None = None, native: bool | None = None) -> None:
        self._arrays_after = ARRAY_AFTER if arrays_after is None else arrays_after
        self._native = (NATIVE if native is None else native) and _plainruns is not None
        self._met, self._not_before = 0, -1

    def __call__(self, stream: Stream) -> PlainRun | None:
        at_hand = getattr(stream, "at_hand", None)  # a stream that lends its decoded pieces
        if at_hand is None or stream.pos < self._not_before:
            return None
        piece, at = at_hand()
        base = stream.pos - at
        if self._native and (found := _plainruns.plain_headers(piece, at, base)) is not None:
            stream.passed(found[-1] - at)
            return PlainRun(*found[:-1], piece, base)
        spans = plain_spans(piece, at)
        if len(spans) >= ARRAY_RUN and self._met >= self._arrays_after:
            run = _array_run(piece, spans, base)
        else:
            run = _run(piece, spans, base)
        if run is None:
            if spans:
                self._not_before = base + _end(spans[-1])
            return None
        self._met += len(run.kinds)
        stream.passed(_end(spans[len(run.kinds) - 1]) - at)
        return run


def _end(span: tuple[int, str, int]) -> int:
    """Where in its piece the member of a span ends, padding included."""
    at, _, stored = span
    return at + BLOCK + stored + (-stored % BLOCK)


def plain_spans(piece: memoryview, at: int) -> list[tuple[int, str, int]]:
    """(offset in piece, type, bytes of data) of the headers from at on whose typeflag and size field make them
    look plain, up to the first that does not or does not lie whole in piece: found by their sizes alone, so
    that all can be checked together."""
    spans = []
    end = len(piece)
    read = SIZE_AND_TYPE.unpack_from
    while at + BLOCK <= end:
        size, typeflag = read(piece, at)
        kind = PLAIN.get(typeflag)
        if kind is None:
            break
        stored = 0
        if kind == "file":
            try:
                stored = int(size.rstrip(b"\0"), 8)
            except ValueError:
                break
        after = at + BLOCK + stored + (-stored % BLOCK)
        if stored < 0 or after > end:
            break
        spans.append((at, kind, stored))
        at = after
    return spans


def _run(piece: memoryview, spans: list[tuple[int, str, int]], base: int) -> PlainRun | None:
    """The run of spans read header by header as the walk reads any, up to the first that is not plain (None
    when that is the first)."""
    rows = []
    for at, kind, stored in spans:
        block = piece[at : at + BLOCK].tobytes()
        if block == ZERO_BLOCK or not checksum_ok(block):
            break
        fields, bad = header_fields(block)
        name, mode, uid, gid, size, mtime, _, linkname, uname, gname = fields
        if bad or not name or linkname or (kind == "file" and (name[-1:] == b"/" or size != stored)):
            break
        rows.append((name, kind, stored, mode, mtime, uid, gid, uname, gname, base + at))
    if not rows:
        return None
    names, kinds, sizes, modes, mtimes, uids, gids, unames, gnames, offsets = map(list, zip(*rows, strict=True))
    return PlainRun(names, b"".join(name + b"\0" for name in names), kinds, sizes, modes, mtimes, uids, gids, unames,
                    gnames, offsets, piece, base)  # fmt: skip


def _array_run(piece: memoryview, spans: list[tuple[int, str, int]], base: int) -> PlainRun | None:
    """_run, read as one array (headerarrays.read_headers) up to the first not in canonical form."""
    from cloudvault.archive.headerarrays import read_headers  # numpy: only where runs are long and many

    starts = [at for at, _, _ in spans]
    found = read_headers(b"".join([piece[at : at + BLOCK] for at in starts]), [kind == "file" for _, kind, _ in spans],
                         [stored for _, _, stored in spans])  # fmt: skip
    count = found.count
    if not count:
        return None
    numbers = found.numbers
    if found.owner is not None:
        unames, gnames = [_owner_name(found.owner[0])] * count, [_owner_name(found.owner[1])] * count
    else:
        unames = [_owner_name(piece[at + 265 : at + 297].tobytes()) for at in starts[:count]]
        gnames = [_owner_name(piece[at + 297 : at + 329].tobytes()) for at in starts[:count]]
    return PlainRun(found.names.split(b"\0", count)[:count], found.names, [kind for _, kind, _ in spans[:count]],
                    [stored for _, _, stored in spans[:count]], numbers["mode"], numbers["mtime"], numbers["uid"],
                    numbers["gid"], unames, gnames, [base + at for at in starts[:count]], piece, base)  # fmt: skip


def _owner_name(field: bytes) -> str:
    return cstring(field).decode("utf-8", "replace")
