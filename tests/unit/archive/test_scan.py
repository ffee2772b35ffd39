"""Property tests: the archive scan's records agree with Python's tarfile, and MemberReader gives back every
member's bytes, in any order, from every archive shape the tests build (zstd, -T0, --long, pzstd, Python)."""

from __future__ import annotations

import io
import random
import tarfile
from functools import partial

import blake3
import pytest
import zstandard
from archives import COMPRESSORS, compress, gnu_tar, make_tree, python_tar
from conftest import require
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cloudvault.archive.scan import ArchiveScan, member_path
from cloudvault.catalog.lookup import EntryMembers
from cloudvault.io.members import MemberReader, read_order

NAME_CHARS = st.characters(whitelist_categories=["Lu", "Ll", "Nd"], whitelist_characters="_-. 가é")
SEGMENT = st.text(NAME_CHARS, min_size=1, max_size=60).filter(lambda s: s not in (".", ".."))
NAME = st.lists(SEGMENT, min_size=1, max_size=6).map("/".join)  # up to ~360 bytes: GNU long names, pax paths
SHORT_SEGMENT = st.text(NAME_CHARS, min_size=1, max_size=8).filter(lambda s: s not in (".", ".."))
USTAR_NAME = st.lists(SHORT_SEGMENT, min_size=1, max_size=4).map("/".join)  # at most 99 bytes: USTAR's name field
SIZE = st.one_of(st.sampled_from([0, 1, 511, 512, 513, 1024, 4096, 10240]), st.integers(0, 40_000))
TYPES = {tarfile.REGTYPE: "file", tarfile.SYMTYPE: "symlink", tarfile.LNKTYPE: "hardlink", tarfile.DIRTYPE: "dir"}


@st.composite
def tar_archives(draw) -> bytes:
    """A tar (GNU, pax or USTAR) of random files, folders, symlinks and hardlinks to earlier files."""
    fmt = draw(st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT]))
    names_of = USTAR_NAME if fmt == tarfile.USTAR_FORMAT else NAME
    names = draw(st.lists(names_of, min_size=1, max_size=12, unique=True))
    rng = random.Random(draw(st.integers(0, 2**32)))
    buf, files = io.BytesIO(), []
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name in names:
            kind = draw(st.sampled_from(["file", "file", "dir", "symlink", "hardlink"]))
            info = tarfile.TarInfo(name)
            info.mtime, info.mode, info.uid, info.uname = rng.randrange(2**33), 0o640, rng.randrange(70000), "lab"
            if kind == "file" or (kind == "hardlink" and not files):
                info.size = draw(SIZE)
                tar.addfile(info, io.BytesIO(rng.randbytes(info.size)))
                files.append(name)
                continue
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            else:
                info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
                info.linkname = draw(names_of) if kind == "symlink" else draw(st.sampled_from(files))
            tar.addfile(info)
    return buf.getvalue()


def _zstd_frames(raw: bytes, frame_size: int) -> bytes:
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    return b"".join(cctx.compress(raw[i : i + frame_size]) for i in range(0, len(raw), frame_size))


@settings(max_examples=60, deadline=None)
@given(tar_archives(), st.sampled_from([700, 4096, 65536, 1 << 20]), st.booleans())
def test_scan_records_agree_with_python_tarfile(raw, frame_size, parallel):
    blob = _zstd_frames(raw, frame_size)
    opener = partial(io.BytesIO, blob) if parallel else None
    scan = ArchiveScan(io.BytesIO(blob), opener=opener)
    records = list(scan)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        infos = tar.getmembers()
        data = {ti.name: tar.extractfile(ti).read() for ti in infos if ti.isreg()}
    assert [r.path for r in records] == [ti.name for ti in infos]
    for rec, ti in zip(records, infos, strict=True):
        assert rec.type == TYPES[ti.type]
        assert (rec.mode, rec.mtime, rec.uid, rec.gid, rec.uname, rec.gname) == (
            ti.mode, ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname)  # fmt: skip
        assert (rec.header_offset, rec.data_offset) == (ti.offset, ti.offset_data)
        if ti.isreg():
            assert rec.size == ti.size and rec.blake3 == blake3.blake3(data[ti.name]).hexdigest()
            assert raw[rec.data_offset : rec.data_offset + rec.size] == data[ti.name]
        elif ti.islnk():  # names are unique here: the target's data is the one member of that name
            assert rec.size == 0 and rec.blake3 == blake3.blake3(data[ti.linkname]).hexdigest()
        else:
            assert rec.size == 0 and rec.blake3 is None
        if ti.issym():
            assert rec.link_target == ti.linkname
        if ti.islnk():
            assert rec.link_target == member_path(ti.linkname.encode())[0]
    result = scan.result
    assert result.status == "ok" and result.member_count == len(infos) and result.raw_size == len(raw)
    assert result.blake3 == blake3.blake3(blob).hexdigest()
    assert sum(f.comp_size for f in result.frames) == len(blob)
    sizes = [min(frame_size, len(raw) - i) for i in range(0, len(raw), frame_size)]
    assert [f.raw_size for f in result.frames] == sizes


SHAPES = [("gnu", how) for how in COMPRESSORS] + [("gnu", "python"), ("python", "pzstd"), ("posix", "python")]


@pytest.fixture(scope="module")
def every_shape(tmp_path_factory):
    """One indexed catalog holding the make_tree archive in every shape; tar bytes by archive name."""
    for tool in ("tar", "zstd", "pzstd"):
        require(tool)
    from cloudvault.catalog.db import open_catalog
    from cloudvault.index.roots import resolve_root
    from cloudvault.index.run import IndexOptions, index_mirrors

    base = tmp_path_factory.mktemp("shapes")
    src = make_tree(base / "src")
    entry = base / "m/018_shapes"
    entry.mkdir(parents=True)
    tars = {}
    for fmt, how in SHAPES:
        tar_path = base / f"{fmt}.tar"
        if not tar_path.exists():
            python_tar(src, tar_path) if fmt == "python" else gnu_tar(src, tar_path, fmt)
        name = f"{fmt}_{how}.tar.zst"
        compress(tar_path, entry / name, how)
        tars[name] = tar_path.read_bytes()
    conn = open_catalog(base / "c.db", create=True)
    report = index_mirrors(conn, [resolve_root(str(base / "m"), None)], IndexOptions(workers=1))
    assert not report.damaged and report.archives_read == len(SHAPES)
    mirror_id = conn.execute("SELECT id FROM mirrors").fetchone()[0]
    everything = EntryMembers(conn, mirror_id, "018_shapes").glob("*")
    members = [m for m in everything if m.archive and m.type in ("file", "hardlink")]
    return conn, members, tars


def _expected(member, tars: dict[str, bytes], by_path: dict) -> bytes:
    raw = tars[member.archive.rsplit("/", 1)[-1]]
    if member.type == "hardlink":
        member = by_path[(member.archive, member.link_target)]
    return raw[member.data_offset : member.data_offset + member.size]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False), st.booleans())
def test_member_reader_gives_back_every_member_of_every_shape(every_shape, rng, in_read_order):
    conn, members, tars = every_shape
    by_path = {(m.archive, m.path): m for m in members if m.type == "file"}
    picked = rng.sample(members, rng.randint(1, len(members)))
    if in_read_order:
        picked = read_order(picked)
    with MemberReader(conn) as reader:
        for member in picked:
            stream = reader.open(member)
            got = b"".join(stream)
            assert got == _expected(member, tars, by_path), member.label
            assert stream.verified


def test_every_shape_was_indexed_with_its_own_frame_table(every_shape):
    conn, members, _ = every_shape
    frames = dict(conn.execute("SELECT f.path, a.frame_count FROM archives a JOIN files f ON f.id = a.file_id"))
    assert frames["018_shapes/gnu_python.tar.zst"] > 1 and frames["018_shapes/posix_python.tar.zst"] > 1
    assert frames["018_shapes/gnu_zstd.tar.zst"] == 1
    assert len({m.archive for m in members}) == len(SHAPES)


LINK_NAME = st.lists(st.sampled_from(["l1", "l2", "d"]), min_size=1, max_size=3).map("/".join)
LINK_TARGET = st.lists(st.sampled_from(["..", ".", "l1", "l2", "d", "x"]), min_size=1, max_size=4).map("/".join)
FILE_NAME = st.tuples(st.lists(st.sampled_from(["l1", "l2", "d"]), max_size=2), st.sampled_from(["f", "g"])).map(
    lambda t: "/".join([*t[0], t[1]])
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("symlink"), LINK_NAME, LINK_TARGET),
                          st.tuples(st.just("file"), FILE_NAME, st.none())), min_size=1, max_size=8))  # fmt: skip
@example([("symlink", "d/d/l1", ".."), ("symlink", "d/d/l2", "l1/../.."), ("file", "d/g", None)])
@example([("symlink", "d/l1", "."), ("symlink", "d/l1/l2", "../.."), ("file", "l1/f", None)])
def test_link_chains_flag_what_pythons_data_filter_refuses(members):
    """Symlinks and files in random order, extracted one by one with tarfile's 'data' filter (which resolves each
    against what is already on disk): the first member it refuses is flagged unsafe by the scan."""
    import os
    import shutil
    import tempfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for kind, name, target in members:
            info = tarfile.TarInfo(name)
            if kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
            else:
                info.size = 2
                tar.addfile(info, io.BytesIO(b"ok"))
    sandbox = tempfile.mkdtemp()
    dest = os.path.join(sandbox, "a", "b", "c", "d", "dest")  # room to climb: nothing refused is written anyway
    os.makedirs(dest)
    refused = None
    try:
        with tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as tar:
            for info in tar.getmembers():
                on_disk = os.path.join(dest, info.name)
                if info.issym() and os.path.lexists(on_disk) and not os.path.islink(on_disk):
                    break  # a link over a folder: tarfile falls back to copying, not what this is about
                try:
                    tar.extract(info, dest, filter="data")
                except (tarfile.OutsideDestinationError, tarfile.LinkOutsideDestinationError):
                    refused = info.name
                    break
                except OSError:  # a file over a folder, a link loop: not what this property is about
                    break
    finally:
        shutil.rmtree(sandbox)
    scan = ArchiveScan(io.BytesIO(_zstd_frames(buf.getvalue(), 1 << 20)))
    list(scan)
    flagged = [f.member for f in scan.result.flags if f.kind == "unsafe_member"]
    if refused is not None:
        assert refused in flagged


@settings(max_examples=60, deadline=None)
@given(tar_archives(), st.sampled_from([4096, 65536]), st.floats(0.0, 0.999), st.booleans())
def test_a_truncated_archive_yields_only_true_records_then_says_truncated(raw, frame_size, keep, parallel):
    """Cut anywhere: every record the scan still gives is exactly the whole archive's, the archive hash is of the
    bytes that are there, and the status names the damage."""
    blob = _zstd_frames(raw, frame_size)
    whole_scan = ArchiveScan(io.BytesIO(blob))
    whole = list(whole_scan)
    cut = blob[: int(len(blob) * keep)]
    scan = ArchiveScan(io.BytesIO(cut), opener=partial(io.BytesIO, cut) if parallel else None)
    records = list(scan)
    assert records == whole[: len(records)]
    assert scan.result.blake3 == blake3.blake3(cut).hexdigest()
    frame_ends = {0} | {f.comp_offset + f.comp_size for f in whole_scan.result.frames}
    if len(cut) not in frame_ends:  # cut inside a frame (at a frame's end the rest is a shorter, valid file)
        assert scan.result.status in ("truncated", "not_zstd")
        assert scan.result.flags and scan.result.flags[0].kind == scan.result.status


def test_a_real_tar_tv_listing_matches_its_archive(tmp_path, vault):
    """The lab's `.tar.zst.list` files are `tar -t`/`tar -tv` output: names with spaces, unicode, links."""
    import subprocess

    for tool in ("tar", "zstd"):
        require(tool)
    src = make_tree(tmp_path / "src", non_utf8=False)
    (src / "name with spaces.txt").write_text("x\n")
    archive_dir = tmp_path / "m/018_x"
    archive_dir.mkdir(parents=True)
    gnu_tar(src, tmp_path / "a.tar", "gnu")
    archive = compress(tmp_path / "a.tar", archive_dir / "a.tar.zst", "zstd")
    for flags, name in (("-tvf", "a.tar.zst.list"), ("-tf", "b.tar.zst.list")):
        if name.startswith("b"):
            (archive_dir / "b.tar.zst").write_bytes(archive.read_bytes())
        listing = subprocess.run(["tar", flags, str(tmp_path / "a.tar")], capture_output=True, check=True).stdout
        (archive_dir / name).write_bytes(listing)
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", "-q", str(tmp_path / "m"))
    assert r.code == 0, r.err
    from sqlite3 import connect

    assert [s for (s,) in connect(db).execute("SELECT list_status FROM archives")] == ["match", "match"]


@pytest.mark.parametrize("frame_size", [1 << 30, 300_000])
def test_small_members_inspected_in_batches_flag_exactly_what_one_by_one_does(frame_size):
    """Thousands of small members (several batches): secrets in the first, a middle and the last member are
    flagged with their lines, a literal split across two members and a token in a `.bin` are not; the flags equal
    those of the member-by-member scan (no prefilter)."""
    from cloudvault.index.secrets import DEFAULT_RULES, SecretRules

    rules = SecretRules(DEFAULT_RULES)
    token = "hf_" + "A1b2C3d4" * 5
    bodies = {f"logs/{i:05d}.log": b"step=%d loss=0.5\n" % i * 25 for i in range(3000)}
    bodies["logs/00000.log"] = f"export HF_TOKEN={token}\n".encode() + bodies["logs/00000.log"]
    bodies["logs/01500.log"] = b"a\nb\n" + f"token {token}\n".encode()
    bodies["logs/01700.log"] = b"ends with hf"  # the next member starts with the rest of a token
    bodies["logs/01701.log"] = ("_" + "A1b2C3d4" * 5 + "\n").encode()
    bodies["dumps/scores.bin"] = f"{token}\n".encode()
    bodies["logs/02999.log"] = b"x\n" + f"key {token}\n".encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, body in bodies.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    archive = _zstd_frames(buf.getvalue(), frame_size)

    def flags(**kwargs) -> list[tuple[str, str, str]]:
        opener = partial(io.BytesIO, archive) if frame_size < len(archive) else None  # frames decoded in parallel
        scan = ArchiveScan(io.BytesIO(archive), inspect=rules.scanner, opener=opener, **kwargs)
        assert len(list(scan)) == len(bodies)
        return sorted((f.member, f.kind, f.detail) for f in scan.result.flags)

    batched = flags(prefilter=rules.may_match)
    assert batched == [
        ("logs/00000.log", "secret", "hf_token_assignment at line 1 (value not stored)"),
        ("logs/01500.log", "secret", "hf_token at line 3 (value not stored)"),
        ("logs/02999.log", "secret", "hf_token at line 2 (value not stored)"),
    ]
    assert batched == flags()
