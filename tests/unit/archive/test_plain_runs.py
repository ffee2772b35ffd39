"""Plain members read together from a decoded piece (plainruns.PlainRun, the scan's batched loop) against the walk one
member at a time and against tarfile: the same headers, data, records, hashes and flags, for members that cross
pieces, odd members between plain ones, and damaged headers anywhere."""

from __future__ import annotations

import io
import os
import random
import subprocess
import tarfile
from functools import partial

import blake3
import pytest
import zstandard
from conftest import require
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudvault.archive import plainruns
from cloudvault.archive.plainruns import PlainRun, PlainRuns
from cloudvault.archive.scan import ArchiveScan
from cloudvault.archive.tar import TarFormatError, iter_members
from cloudvault.index.secrets import DEFAULT_RULES, SecretRules


class Pieces:
    """A tar stream over bytes handed out in pieces of a given size, lending each piece as the zstd streams do
    (at_hand, passed): runs stop at the piece's end."""

    def __init__(self, data: bytes, piece: int) -> None:
        self._data, self._piece, self.pos = memoryview(data), piece, 0

    def _end(self) -> int:
        return min(len(self._data), (self.pos // self._piece + 1) * self._piece)

    def at_hand(self) -> tuple[memoryview, int]:
        start = self.pos // self._piece * self._piece
        return self._data[start : min(len(self._data), start + self._piece)], self.pos - start

    def passed(self, n: int) -> None:
        self.pos += n

    def read_view(self, n: int) -> memoryview:
        got = self._data[self.pos : min(self.pos + n, self._end())]
        self.pos += len(got)
        return got

    def read_some(self, n: int) -> bytes:
        return bytes(self.read_view(n))

    def read(self, n: int) -> bytes:
        parts = []
        while n and (got := self.read_some(n)):
            parts.append(got)
            n -= len(got)
        return b"".join(parts)


def walked(stream, runs: PlainRuns | None) -> tuple[list[tuple], list[tuple], str | None]:
    """(header, data) of every member, the damage told, and the error that ended the walk (None: its end)."""
    damage, members = [], []
    try:
        for item in iter_members(stream, lambda *told: damage.append(told), runs=runs):
            pairs = [(item.header(i), item.member_data(i)) for i in range(len(item.kinds))] if type(
                item) is PlainRun else [item]  # fmt: skip
            members += [(h, b"".join(data.chunks())) for h, data in pairs]
    except TarFormatError as exc:
        return members, damage, f"{exc.kind} {exc}"
    return members, damage, None


ODD = {  # i % 97 -> the member after plain member i: (name, data, type, link target)
    1: lambda i, rng: (f"runs/r{i // 50:03d}/", b"", tarfile.DIRTYPE, ""),
    2: lambda i, rng: (f"./dot/{i}.txt", b"dot", tarfile.REGTYPE, ""),
    3: lambda i, rng: (f"bytes/caf\udce9{i}.txt", b"latin-1 name", tarfile.REGTYPE, ""),
    4: lambda i, rng: ("long/" + "x" * 150 + f"{i}.log", b"long name" * 40, tarfile.REGTYPE, ""),
    5: lambda i, rng: (f"links/l{i}", b"", tarfile.SYMTYPE, f"../runs/r{i // 50:03d}"),
    6: lambda i, rng: (f"links/h{i}", b"", tarfile.LNKTYPE, f"runs/r{i // 50:03d}/rank{i:05d}.log"),
    7: lambda i, rng: (f"up/../escape{i}.txt", b"out", tarfile.REGTYPE, ""),
    8: lambda i, rng: (f"big/{i}.bin", rng.randbytes(100 << 10), tarfile.REGTYPE, ""),
    9: lambda i, rng: (f"empty/{i}", b"", tarfile.REGTYPE, ""),
    10: lambda i, rng: (f"env{i}/pyvenv.cfg", b"home = /usr/bin\n", tarfile.REGTYPE, ""),
    11: lambda i, rng: (f"secrets/{i}.env", b"HF_TOKEN=hf_" + b"a" * 34 + b"\n", tarfile.REGTYPE, ""),
    12: lambda i, rng: (f"nested/{i}.TGZ", inner_tgz(i), tarfile.REGTYPE, ""),
}


def inner_tgz(i: int) -> bytes:
    """A .tgz holding one file: an archive member the scan reads once more as an archive."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"inner{i}.txt")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"inner\n"))
    return out.getvalue()


def odd_tar(count: int, seed: int = 3) -> bytes:
    """Small logs among the members a walk treats apart (ODD): folders, './' and non-UTF-8 names, a long name,
    symlinks and hardlinks, a '..' name, empty and 100 KiB files, a secret, a pyvenv.cfg."""
    rng = random.Random(seed)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT, encoding="utf-8",
                      errors="surrogateescape") as tar:  # fmt: skip
        for i in range(count):
            members = [(f"runs/r{i // 50:03d}/rank{i:05d}.log", b"step loss=%d\n" % i * rng.randint(0, 300),
                        tarfile.REGTYPE, "")]  # fmt: skip
            if i % 97 in ODD:
                members.append(ODD[i % 97](i, rng))
            for name, data, kind, link in members:
                info = tarfile.TarInfo(name)
                info.type, info.linkname, info.mtime, info.mode, info.size = kind, link, 1_760_000_000, 0o640, len(data)
                tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return out.getvalue()


# how a run's headers are read: by tar.py one by one, as one numpy array, or by the native walker (_plainruns.c)
ARRAYS = {"one by one": {"arrays_after": 10**9, "native": False}, "as arrays": {"arrays_after": 0, "native": False},
          "native": {"native": True}}  # fmt: skip


@pytest.fixture(autouse=True)
def _native_built(request):
    """The native mode is skipped where the extension is not built (no compiler here; CI always builds it)."""
    callspec = getattr(request.node, "callspec", None)
    if callspec and callspec.params.get("arrays") == "native" and plainruns._plainruns is None:
        if os.environ.get("CI") == "true":
            pytest.fail("cloudvault._plainruns is not built in CI")
        pytest.skip("cloudvault._plainruns not built")


@pytest.mark.parametrize("arrays", ARRAYS)
@pytest.mark.parametrize("piece", [512, 4096, 65536, 1 << 20])
def test_runs_give_the_headers_and_data_of_the_walk_one_member_at_a_time(piece, arrays):
    data = odd_tar(1200)
    one_by_one = walked(Pieces(data, piece), runs=None)
    together = walked(Pieces(data, piece), runs=PlainRuns(**ARRAYS[arrays]))
    assert together == one_by_one and one_by_one[2] is None and len(one_by_one[0]) > 1200


SMALL_ODD = odd_tar(240, seed=5)  # runs of up to 96 plain members: read as arrays in a 1 MiB piece
with tarfile.open(fileobj=io.BytesIO(SMALL_ODD)) as _tar:
    HEADERS = [m.offset for m in _tar.getmembers()]


def same_with_runs_and_without(data: bytes, piece: int) -> bool:
    without = walked(Pieces(data, piece), runs=None)
    return all(walked(Pieces(data, piece), runs=PlainRuns(**mode)) == without for mode in ARRAYS.values())


@settings(max_examples=300, deadline=None)
@given(member=st.integers(min_value=0), at=st.integers(min_value=0, max_value=511),
       value=st.integers(min_value=0, max_value=255), piece=st.sampled_from([2048, 9000, 1 << 20]))  # fmt: skip
def test_a_damaged_header_byte_is_read_the_same_with_runs_and_without(member, at, value, piece):
    """Any byte of any header changed (its checksum, size, type, a digit of a number, a name, the magic): the
    walk with runs, their headers read one by one or as arrays, tells the same damage, reads the same members
    and ends the same way."""
    data = bytearray(SMALL_ODD)
    data[HEADERS[member % len(HEADERS)] + at] = value
    assert same_with_runs_and_without(bytes(data), piece)


@settings(max_examples=100, deadline=None)
@given(at=st.integers(min_value=0), value=st.integers(min_value=0, max_value=255))
def test_a_damaged_byte_anywhere_is_read_the_same_with_runs_and_without(at, value):
    data = bytearray(SMALL_ODD)
    data[at % len(data)] = value
    assert same_with_runs_and_without(bytes(data), 1 << 20)


def tarfile_view(raw: bytes) -> dict[str, tuple]:
    with tarfile.open(fileobj=io.BytesIO(raw), encoding="utf-8", errors="surrogateescape") as tar:
        found = {}
        for m in tar.getmembers():
            data = tar.extractfile(m).read() if m.isfile() else None
            digest = None if data is None else blake3.blake3(data).hexdigest()
            found[m.name.removeprefix("./").rstrip("/")] = (m.size if m.isfile() else 0, m.mtime, m.offset,
                                                             m.offset_data, digest)  # fmt: skip
        return found


def name_of(record) -> str:
    """A record's name as tarfile gives it (non-UTF-8 bytes as surrogates), less a leading './'."""
    if record.raw_path is None:
        return record.path
    return record.raw_path.decode("utf-8", "surrogateescape").removeprefix("./").rstrip("/")


@pytest.mark.parametrize("arrays", ARRAYS)
@pytest.mark.parametrize("decoders", [1, 2, 4])
@pytest.mark.parametrize("frames", [1, 9])
def test_the_scan_records_every_member_as_tarfile_reads_it_and_flags_the_odd_ones(decoders, frames, arrays,
                                                                                   monkeypatch):  # fmt: skip
    monkeypatch.setattr(plainruns, "ARRAY_AFTER", ARRAYS[arrays].get("arrays_after", 0))
    monkeypatch.setattr(plainruns, "NATIVE", ARRAYS[arrays]["native"])
    raw = odd_tar(4000)  # ~8 MiB: members cross the scan's 4 MiB pieces
    step = -(-len(raw) // frames)
    cctx = zstandard.ZstdCompressor(level=1)
    blob = b"".join(cctx.compress(raw[i : i + step]) for i in range(0, len(raw), step))
    rules = SecretRules(dict(DEFAULT_RULES))
    scan = ArchiveScan(io.BytesIO(blob), inspect=rules.scanner, prefilter=rules.may_match, decoders=decoders,
                       opener=partial(io.BytesIO, blob))  # fmt: skip
    records = list(scan)
    inside = [r for r in records if ".TGZ/" in r.path]  # read once more as archives
    assert {r.path for r in inside} == {f"nested/{i}.TGZ/inner{i}.txt" for i in range(4000) if i % 97 == 12}
    records = [r for r in records if r not in inside]
    view = tarfile_view(raw)
    got = {name_of(r): (r.size, r.mtime, r.header_offset, r.data_offset, r.blake3 if r.type == "file" else None)
           for r in records}  # fmt: skip
    assert got == view and scan.result.member_count == len(records) + len(inside) == len(view) + len(inside)
    assert scan.result.status == "ok" and len(scan.result.frames) == frames
    flagged = {(f.kind, f.member) for f in scan.result.flags}
    assert {m for k, m in flagged if k == "secret"} == {f"secrets/{i}.env" for i in range(4000) if i % 97 == 11}
    assert {m for k, m in flagged if k == "unsafe_member"} >= {f"up/../escape{i}.txt" for i in range(4000)
                                                             if i % 97 == 7}  # fmt: skip
    assert sum(1 for k, _ in flagged if k == "non_utf8_name") == sum(1 for i in range(4000) if i % 97 == 3)
    hardlinks = [r for r in records if r.type == "hardlink"]
    by_path = {r.path: r for r in records}
    assert hardlinks and all(r.blake3 == by_path[r.link_target].blake3 for r in hardlinks)


@pytest.fixture(scope="module")
def tool_tars(tmp_path_factory) -> dict[str, bytes]:
    """Small files in folders, archived by GNU tar (gnu, ustar and posix formats) and by bsdtar."""
    for tool in ("tar", "bsdtar"):
        require(tool)
    src = tmp_path_factory.mktemp("src")
    for i in range(400):
        (src / f"runs/r{i // 40:02d}").mkdir(parents=True, exist_ok=True)
        (src / f"runs/r{i // 40:02d}/rank{i:04d}.log").write_bytes(b"step loss=%d\n" % i * (i % 50))
    out = {}
    for name, cmd in (("gnu", ["tar", "--format=gnu", "-cf"]), ("ustar", ["tar", "--format=ustar", "-cf"]),
                      ("posix", ["tar", "--format=posix", "-cf"]), ("bsdtar", ["bsdtar", "-cf"])):  # fmt: skip
        subprocess.run([*cmd, str(src / f"{name}.tar"), "-C", str(src), "runs"], check=True)
        out[name] = (src / f"{name}.tar").read_bytes()
    return out


@pytest.mark.parametrize("arrays", ARRAYS)
@pytest.mark.parametrize("tool", ["gnu", "ustar", "posix", "bsdtar"])
def test_archives_other_tools_wrote_are_read_the_same_with_runs_and_their_plain_members_in_runs(tool_tars, tool,
                                                                                                 arrays):  # fmt: skip
    """GNU tar's posix format gives each member a pax record (none is plain); the others' members all are, in the
    forms each tool writes its numbers (bsdtar: '000644 \\0'). Then a damaged byte in any header, 300 times."""
    data = tool_tars[tool]
    runs = PlainRuns(**ARRAYS[arrays])
    together = walked(Pieces(data, 1 << 20), runs)
    assert together == walked(Pieces(data, 1 << 20), None) and len(together[0]) == 411 and together[2] is None
    in_runs = sum(len(item.kinds) for item in iter_members(Pieces(data, 1 << 20), runs=PlainRuns(**ARRAYS[arrays]))
                  if type(item) is PlainRun)  # fmt: skip
    assert in_runs == (0 if tool == "posix" else 411)  # runs/, 10 folders, 400 files
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        headers = [m.offset for m in tar.getmembers()]
    rng = random.Random(tool)
    for _ in range(300):
        damaged = bytearray(data)
        damaged[rng.choice(headers) + rng.randrange(512)] = rng.randrange(256)
        assert same_with_runs_and_without(bytes(damaged), rng.choice([4096, 1 << 20]))


def test_a_run_of_small_members_is_hashed_in_one_call_not_one_per_member(monkeypatch):
    """A plain run's small files get their BLAKE3 from one batched call (hashing.member_hex_digests: one native
    call, cloudvault/_plainruns.c) per run, not a `blake3` call per member; the hashes are tarfile's bytes' own."""
    from cloudvault.archive import scan as scan_module

    rng = random.Random(4)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(3000):
            data = rng.randbytes(rng.choice([0, 1, 63, 64, 65, 1023, 1024, 1025, 2048, 4000, 9000]))
            info = tarfile.TarInfo(f"logs/{i // 100:02d}/rank{i:05d}.log")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    raw = raw.getvalue()
    batched, alone = [], []
    real = scan_module.member_hex_digests
    monkeypatch.setattr(scan_module, "member_hex_digests", lambda *a: batched.append(len(a[1])) or real(*a))
    real_blake3 = blake3.blake3
    monkeypatch.setattr(scan_module.blake3, "blake3", lambda *a, **k: alone.append(1) or real_blake3(*a, **k))
    records = list(ArchiveScan(io.BytesIO(zstandard.ZstdCompressor().compress(raw)), decoders=2))
    monkeypatch.undo()
    assert len(records) == 3000 and sum(batched) >= 2900 and len(batched) <= 10 and len(alone) <= 20
    view = tarfile_view(raw)
    assert {r.path: r.blake3 for r in records} == {name: found[4] for name, found in view.items()}


@settings(max_examples=400, deadline=None)
@given(names=st.lists(st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"), max_size=12)
                      .map(lambda stem: stem + random.Random(stem).choice(["", ".log", ".ZIP", ".tar.Zst", ".7z",
                                                                           ".txt", ".K", ".gz.bak", "\u212a", ".001"])),
                      min_size=1, max_size=8))  # fmt: skip
def test_one_search_for_archive_endings_passes_every_name_might_be_archive_takes(names):
    """The run's gate for names that may be archives (one regex search of the joined names where they are ASCII)
    says yes wherever might_be_archive does for one of them, and exactly where one's last ending, lowered, is an
    archive name's (the gate it replaces)."""
    from cloudvault.archive import scan as scan_module
    from cloudvault.archive.formats import might_be_archive

    joined = b"".join(name.encode() + b"\0" for name in names)
    gate = scan_module._may_name_an_archive(joined, names)
    assert gate >= any(map(might_be_archive, names))
    assert gate == any(name[name.rfind(".") :].lower() in scan_module.ARCHIVE_ENDINGS for name in names)


@pytest.mark.parametrize("arrays", ARRAYS)
def test_owners_modes_and_times_that_change_from_member_to_member_are_each_members_own(arrays):
    """Members whose mode, mtime, uid, gid, owner and group now repeat, now change (the native walker hands a
    repeated value's object out again): every header as tar.py reads it alone, and as tarfile reads it."""
    rng = random.Random(8)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(600):
            info = tarfile.TarInfo(f"d/m{i}.log")
            info.size = rng.randint(0, 700)
            info.mode = rng.choice([0o644, 0o644, 0o600, 0o755])
            info.mtime = rng.choice([1_760_000_000, 1_760_000_000, 1_700_000_001])
            info.uid, info.gid = rng.choice([(0, 0), (1000, 1000), (1000, 1000), (70000, 5)])
            info.uname, info.gname = rng.choice([("", ""), ("lab", "lab"), ("lab", "staff"), ("caf\u00e9", "x")])
            tar.addfile(info, io.BytesIO(rng.randbytes(info.size)))
    data = out.getvalue()
    together = walked(Pieces(data, 1 << 20), PlainRuns(**ARRAYS[arrays]))
    assert together == walked(Pieces(data, 1 << 20), None)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        want = [(m.name, m.mode, m.mtime, m.uid, m.gid, m.uname, m.gname) for m in tar.getmembers()]
    assert [(h.name.decode(), h.mode, h.mtime, h.uid, h.gid, h.uname, h.gname) for h, _ in together[0]] == want


@pytest.mark.parametrize("arrays", ARRAYS)
@pytest.mark.parametrize("folders", [10, 5000])  # the second: more lone members than wait unsettled (UNSETTLED_MAX)
def test_a_hardlink_holds_its_target_as_extracting_up_to_it_left_it(arrays, folders, monkeypatch):
    """What a small file of a run, a folder and a `tar -r` update left at a path is what a hardlink after them holds,
    however many lone members came between (GNU tar extracts it so: a link to the bytes there at that point)."""
    monkeypatch.setattr(plainruns, "ARRAY_AFTER", ARRAYS[arrays].get("arrays_after", 0))
    monkeypatch.setattr(plainruns, "NATIVE", ARRAYS[arrays]["native"])
    out = io.BytesIO()

    def add(tar, name, data=None, kind=tarfile.REGTYPE, link=""):
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.size = kind, link, len(data or b"")
        tar.addfile(info, io.BytesIO(data) if data is not None else None)

    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        add(tar, "a.log", b"first\n")
        for i in range(folders):
            add(tar, f"d{i}", kind=tarfile.DIRTYPE)
        add(tar, "h1", kind=tarfile.LNKTYPE, link="a.log")
        add(tar, "a.log", b"second\n")
        for i in range(folders):
            add(tar, f"e{i}", kind=tarfile.DIRTYPE)
        add(tar, "h2", kind=tarfile.LNKTYPE, link="a.log")
        add(tar, "h3", kind=tarfile.LNKTYPE, link="d1")  # a folder: nothing with data there
    records = {r.path: r for r in ArchiveScan(io.BytesIO(zstandard.ZstdCompressor().compress(out.getvalue())))}
    assert records["h1"].blake3 == blake3.blake3(b"first\n").hexdigest()
    assert records["h2"].blake3 == blake3.blake3(b"second\n").hexdigest()
    assert records["h3"].blake3 is None
