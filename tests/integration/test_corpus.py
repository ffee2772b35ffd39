"""Every archive of the corpus (tests/corpus/SOURCES.md, and archives GNU tar and bsdtar write here), in every
compression shape, read by `vault index` as GNU tar reads it: the members it lists (names byte-exact, types,
sizes, link targets), the bytes it extracts, a clean verify, and a flag exactly where GNU tar rejects the archive."""

from __future__ import annotations

import posixpath
import sqlite3
from collections import namedtuple

import pytest
from conftest import require
from corpus.build import ALL_SHAPES as SHAPES
from corpus.build import committed, compress, generated, gnu_extract, gnu_listing, names, safer_name, suffix

from cloudvault.catalog.lookup import MEMBER_SELECT
from cloudvault.cli.main import main
from cloudvault.io.members import MemberReader
from cloudvault.models import Member

pytestmark = pytest.mark.tar
LETTERS = {"file": "-", "hardlink": "h", "symlink": "l", "dir": "d", "chardev": "c", "blockdev": "b", "fifo": "p",
           "label": "V", "other": "?"}  # fmt: skip
DAMAGE = ("not_tar", "corrupt_header", "truncated", "not_zstd", "corrupt_frame")
Truth = namedtuple("Truth", "list_rc listing extract_rc extracted")
NAMES = names()
CASES = [(name, shape) for name in NAMES for shape in SHAPES]
# The archives GNU tar rejects (exit 2 listing them): of these only the flag is compared, and
# test_gnu_tar_rejects_exactly_these keeps the list true to GNU tar on this machine.
REJECTED = {
    "cpython-recursion", "libarchive-test_read_format_gtar_sparse_1_17_posix10_modified",
    "libarchive-test_read_format_tar_V_negative_size", "libarchive-test_read_format_tar_acl_oob_read",
    "libarchive-test_read_format_tar_invalid_pax_size", "libarchive-test_read_format_tar_pax_g_large",
    "ratarmount-denormal-paths-tarfile", "ratarmount-truncated",
}  # fmt: skip
ACCEPTED = [(name, shape) for name, shape in CASES if name not in REJECTED]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Every archive in every shape in a mirror of its own entries, indexed once; with GNU tar's reading."""
    for tool in ("tar", "bsdtar", "zstd", "pzstd", "gzip", "bzip2", "pigz", "bgzip", "xz"):
        require(tool)
    work = tmp_path_factory.mktemp("corpus")
    (work / "tars").mkdir()
    tars = committed(work / "tars") | generated(work / "tars")
    truth = {}
    for i, (name, tar) in enumerate(sorted(tars.items())):
        rc, listing = gnu_listing(tar)
        x_rc, extracted = gnu_extract(tar, work / "gnu" / name)
        truth[name] = Truth(rc, listing, x_rc, extracted)
        for shape in SHAPES:
            entry = work / "mirror" / f"c{i:03d}-{shape}"
            entry.mkdir(parents=True)
            compress(tar, entry / f"{name}{suffix(shape)}", shape)
    db = work / "catalog.db"
    assert main(["--catalog", str(db), "index", "--quiet", str(work / "mirror")]) in (0, 5)  # 5: some are damaged
    entries = {(name, shape): f"c{i:03d}-{shape}" for i, name in enumerate(sorted(tars)) for shape in SHAPES}
    return db, truth, entries


def _archive(db, entry: str, nested: bool = False) -> tuple[str, list[str], list[Member]]:
    """The archive's status, flags and members: those tar lists, or (nested) those of the archives its members are,
    read one level deeper (tests/integration/test_nested.py)."""
    conn = sqlite3.connect(db)
    status, file_id, first_nested = conn.execute(
        "SELECT a.status, f.id, (SELECT min(raw_offset) FROM nested n WHERE n.archive_id = a.id) FROM archives a "
        "JOIN files f ON f.id = a.file_id WHERE f.entry_id = ?", (entry,)
    ).fetchone()
    flags = [k for (k,) in conn.execute("SELECT kind FROM flags WHERE file_id = ?", (file_id,))]
    members = [Member(*r) for r in conn.execute(MEMBER_SELECT + " ORDER BY mb.header_offset", (1, entry))]
    conn.close()
    split = first_nested if first_nested is not None else float("inf")
    return status, flags, [m for m in members if (m.data_offset >= split) == nested]


def _listed(member: Member) -> tuple:
    name = safer_name(member.raw_path if member.raw_path is not None else member.path.encode())
    link = member.raw_link_target if member.raw_link_target is not None else (member.link_target or "").encode()
    if member.type == "hardlink":
        link = safer_name(link)
    size = member.size if member.type == "file" else None
    return LETTERS[member.type], name, size, link if member.type in ("symlink", "hardlink") else None


def _gnu_listed(row: tuple) -> tuple:
    kind, name, size, link = row
    kind = "-" if kind == "C" else kind  # a contiguous file (type 7) is a regular file to vault
    return kind, safer_name(name), size, safer_name(link) if kind == "h" else link


@pytest.mark.parametrize("name,shape", CASES)
def test_flagged_exactly_when_gnu_tar_rejects_it(corpus, name, shape):
    db, truth, entries = corpus
    status, flags, _ = _archive(db, entries[name, shape])
    flagged = status != "ok" or any(kind in DAMAGE for kind in flags)
    assert flagged == (truth[name].list_rc != 0), (status, flags)


def test_gnu_tar_rejects_exactly_these(corpus):
    assert {name for name, t in corpus[1].items() if t.list_rc != 0} == REJECTED


def _accepted(corpus, name: str, shape: str) -> list[Member]:
    """The members vault lists of an archive GNU tar accepts."""
    db, truth, entries = corpus
    assert truth[name].list_rc == 0, "GNU tar rejects this archive: add it to REJECTED"
    return _archive(db, entries[name, shape])[2]


@pytest.mark.parametrize("name,shape", ACCEPTED)
def test_lists_the_members_gnu_tar_lists(corpus, name, shape):
    members = _accepted(corpus, name, shape)
    truth = corpus[1]
    assert [_listed(m) for m in members] == [_gnu_listed(row) for row in truth[name].listing]


@pytest.mark.parametrize("name,shape", ACCEPTED)
def test_extracts_the_bytes_gnu_tar_extracts(corpus, name, shape):
    members = _accepted(corpus, name, shape)
    db, truth, _ = corpus
    last = {}  # path -> the member extracting the whole archive leaves there (the last of its name)
    for m in members:
        last[posixpath.normpath(safer_name(m.raw_path if m.raw_path is not None else m.path.encode()))] = m
    conn = sqlite3.connect(db)
    got = {}
    with MemberReader(conn) as reader:
        for path, m in last.items():
            if m.type in ("file", "hardlink") and path in truth[name].extracted:
                stream = reader.open(m)
                for _ in stream:
                    pass
                assert stream.verified and stream.blake3 == m.blake3
                got[path] = stream.blake3
        for m in _archive(db, corpus[2][name, shape], nested=True)[2]:  # ratarmount's nested tars: each verifies
            if m.type == "file":
                stream = reader.open(m)
                for _ in stream:
                    pass
                assert stream.verified, m.path
    conn.close()
    assert got == truth[name].extracted


@pytest.mark.parametrize("name,shape", ACCEPTED)
def test_verifies_clean_when_untouched(corpus, name, shape):
    _accepted(corpus, name, shape)
    db, _, entries = corpus
    assert main(["--catalog", str(db), "verify", entries[name, shape]]) == 0
