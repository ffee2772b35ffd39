"""Tar archives in other formats than .tar.zst, each written by its own tool (GNU tar -z/-j/-J, bsdtar, pigz, bgzip,
Python's tarfile): `vault index` lists the members `tar -t` lists (names byte-exact, types, sizes, link targets),
`vault extract` writes the bytes `tar -x` writes, `vault verify` is clean, and `vault search` finds them by name."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import require
from corpus.build import compressed_as_shipped, gnu_extract, gnu_listing, safer_name

from cloudvault.catalog.lookup import MEMBER_SELECT
from cloudvault.cli.main import main
from cloudvault.io.members import MemberReader
from cloudvault.models import Member

pytestmark = pytest.mark.tar
LETTERS = {"file": "-", "hardlink": "h", "symlink": "l", "dir": "d"}
# archive name -> how it is made from the tree at src (run in the tree's parent)
MAKERS = {
    "gnutar-z.tar.gz": "tar -czf {out} src",
    "gnutar-j.tar.bz2": "tar -cjf {out} src",
    "gnutar-J.tar.xz": "tar -cJf {out} src",
    "gnutar.tar": "tar -cf {out} src",
    "gnutar-zstd.tzst": "tar --zstd -cf {out} src",
    "gnutar-zstd.tar.zstd": "tar --zstd -cf {out} src",
    "bsdtar-z.tgz": "bsdtar -czf {out} src",
    "bsdtar-j.tbz2": "bsdtar -cjf {out} src",
    "bsdtar-J.txz": "bsdtar -cJf {out} src",
    "bsdtar.tar": "bsdtar -cf {out} src",
    "pigz.tar.gz": "tar -cf - src | pigz -p 2 -b 64 > {out}",
    "bgzip.tar.gz": "tar -cf - src | bgzip -c > {out}",  # 64 KiB gzip members one after another
    "xz-blocks.tar.xz": "tar -cf - src | xz -T2 --block-size=256KiB > {out}",
    "tarfile-gz.tar.gz": "python",
    "tarfile-bz2.tar.bz2": "python",
    "tarfile-xz.tar.xz": "python",
}


def _tree(src: Path) -> None:
    """Folders, an empty file, a long name, a UTF-8 name, a symlink, a hardlink, a 3 MiB member past many pieces."""
    (src / "docs/deep" / ("d" * 60) / ("e" * 60)).mkdir(parents=True)
    (src / "docs/readme.txt").write_text("hello\n")
    (src / "docs/empty").write_bytes(b"")
    (src / "docs/deep" / ("d" * 60) / ("e" * 60) / "long-name.txt").write_text("long\n")
    (src / "docs/caf\u00e9.txt").write_text("caf\u00e9\n")
    os.symlink("readme.txt", src / "docs/link")
    os.link(src / "docs/readme.txt", src / "docs/hard")
    block = bytes(range(256)) * 64
    (src / "big.bin").write_bytes(b"".join(block[i % 251 :] + block[: i % 251] for i in range(200)))
    (src / "key.env").write_text("aws_access_key_id = AKIA" + "ABCDEFGHIJKLMNOP\n")


def _make(name: str, how: str, work: Path, out: Path) -> None:
    if how == "python":
        mode = "w:" + name.rsplit(".", 1)[1]
        with tarfile.open(out, mode, format=tarfile.PAX_FORMAT) as tf:
            tf.add(work / "src", arcname="src")
        return
    subprocess.run(how.format(out=out), shell=True, cwd=work, check=True, capture_output=True)


@pytest.fixture(scope="module")
def formats(tmp_path_factory):
    """Every maker's archive of one tree, in an entry of its own, indexed once; with GNU tar's reading of each."""
    for tool in ("tar", "bsdtar", "pigz", "bgzip", "xz", "bzip2", "gzip", "zstd"):
        require(tool)
    work = tmp_path_factory.mktemp("formats")
    _tree(work / "src")
    truth, entries = {}, {}
    for i, (name, how) in enumerate(sorted(MAKERS.items())):
        entry = work / "mirror" / f"{i:03d}_f"
        entry.mkdir(parents=True)
        _make(name, how, work, entry / name)
        truth[name] = (gnu_listing(entry / name), gnu_extract(entry / name, work / "gnu" / name))
        entries[name] = entry.name
    db = work / "catalog.db"
    assert main(["--catalog", str(db), "index", "--quiet", str(work / "mirror")]) == 0
    return db, truth, entries, work


def _members(db: Path, entry: str, nested: bool = False) -> tuple[str, str, list[Member]]:
    """The archive's format, status and members in stored order: those tar lists (or, nested, those of the archives
    it holds as members: tests/integration/test_nested.py)."""
    conn = sqlite3.connect(db)
    fmt, status, first_nested = conn.execute(
        "SELECT a.format, a.status, (SELECT min(raw_offset) FROM nested n WHERE n.archive_id = a.id) FROM archives a "
        "JOIN files f ON f.id = a.file_id WHERE f.entry_id = ?", (entry,)).fetchone()  # fmt: skip
    members = [Member(*r) for r in conn.execute(MEMBER_SELECT + " ORDER BY mb.header_offset", (1, entry))]
    conn.close()
    split = first_nested if first_nested is not None else float("inf")
    return fmt, status, [m for m in members if (m.data_offset >= split) == nested]


def _listed(m: Member) -> tuple:
    name = safer_name(m.raw_path if m.raw_path is not None else m.path.encode())
    link = (m.link_target or "").encode()
    kept = m.type in ("symlink", "hardlink")
    return LETTERS[m.type], name, m.size if m.type == "file" else None, link if kept else None


EXPECTED_FORMAT = {".gz": "tar.gz", ".tgz": "tar.gz", ".bz2": "tar.bz2", ".tbz2": "tar.bz2", ".xz": "tar.xz",
                   ".txz": "tar.xz", ".tar": "tar", ".tzst": "tar.zst", ".zstd": "tar.zst"}  # fmt: skip


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_lists_what_tar_lists(formats, name):
    db, truth, entries, _ = formats
    (rc, listing), _ = truth[name]
    fmt, status, members = _members(db, entries[name])
    assert rc == 0 and status == "ok"
    assert fmt == EXPECTED_FORMAT["." + name.rsplit(".", 1)[1]]
    gnu = [(kind, safer_name(n), size, safer_name(link) if kind == "h" else link) for kind, n, size, link in listing]
    assert [_listed(m) for m in members] == gnu


def _read_back(db, members, name=lambda path: path) -> dict[bytes, str]:
    """name(path) -> BLAKE3 of each file or hardlink member as vault's reader hands it out, each verified."""
    conn = sqlite3.connect(db)
    got = {}
    with MemberReader(conn) as reader:
        for m in members:
            if m.type in ("file", "hardlink"):
                stream = reader.open(m)
                for _ in stream:
                    pass
                assert stream.verified, m.path
                got[name(m.path.encode())] = stream.blake3
    conn.close()
    return got


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_extracts_the_bytes_tar_extracts(formats, name):
    db, truth, entries, _ = formats
    _, (x_rc, extracted) = truth[name]
    _, _, members = _members(db, entries[name])
    assert x_rc == 0 and _read_back(db, members) == extracted


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_vault_extract_writes_the_bytes_tar_writes(formats, name, tmp_path):
    db, _, entries, work = formats
    out = tmp_path / "out"
    assert main(["--catalog", str(db), "extract", entries[name], f"{name}/src/big.bin", "-o", str(out)]) == 0
    assert (out / "big.bin").read_bytes() == (work / "gnu" / name / "src/big.bin").read_bytes()


def test_verify_is_clean_and_search_and_grep_find_members_in_every_format(formats, capsys):
    db, _, entries, _ = formats
    assert main(["--catalog", str(db), "verify"]) == 0
    capsys.readouterr()
    assert main(["--catalog", str(db), "search", "long-name.txt"]) == 0
    out = capsys.readouterr().out
    assert all(f"{entries[name]}/{name}" in out for name in MAKERS), out
    capsys.readouterr()
    main(["--catalog", str(db), "grep", "-F", "caf\u00e9"])
    out = capsys.readouterr().out
    assert all(f"{entries[name]}:{name}::src/docs/caf\u00e9.txt:1:caf\u00e9" in out for name in MAKERS), out


def test_a_secret_in_a_gzip_member_is_flagged_as_in_a_tar_zst(formats):
    db, _, entries, _ = formats
    conn = sqlite3.connect(db)
    flagged = {entry for (entry,) in conn.execute(
        "SELECT f.entry_id FROM flags fl JOIN files f ON f.id = fl.file_id WHERE fl.kind = 'secret' "
        "AND fl.member = 'src/key.env'")}  # fmt: skip
    conn.close()
    assert flagged == set(entries.values())


def test_the_lab_s_tgz_is_searchable_by_member_name(tmp_path, vault):
    """001's data/raw/rtx_raw.tgz (CATALOG.md names it a key file): its members by name, extracted as tar does."""
    require("tar")
    raw = tmp_path / "src/rtx_raw"
    raw.mkdir(parents=True)
    (raw / "rtx_4090_run1.csv").write_text("step,loss\n1,2.5\n")
    (tmp_path / "m/001_gpu/data/raw").mkdir(parents=True)
    tgz = tmp_path / "m/001_gpu/data/raw/rtx_raw.tgz"
    subprocess.run(["tar", "-C", str(tmp_path / "src"), "-czf", str(tgz), "rtx_raw"], check=True)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", str(tmp_path / "m")).code == 0
    found = vault("--catalog", db, "search", "rtx_4090_run1")
    assert found.code == 0 and "rtx_raw/rtx_4090_run1.csv" in found.out and "data/raw/rtx_raw.tgz" in found.out
    out = vault("--catalog", db, "extract", "001", "data/raw/rtx_raw.tgz/rtx_raw/rtx_4090_run1.csv", "-o", "-")
    assert out.code == 0 and out.out == "step,loss\n1,2.5\n"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """libarchive's and ratarmount's gzip, bzip2, xz and zstd test archives as they ship them, one entry each,
    indexed once; with GNU tar's reading of each."""
    require("tar")
    work = tmp_path_factory.mktemp("shipped")
    (work / "files").mkdir()
    truth, entries = {}, {}
    for i, (name, path) in enumerate(compressed_as_shipped(work / "files").items()):
        entry = work / "mirror" / f"{i:03d}_s"
        entry.mkdir(parents=True)
        os.replace(path, entry / name)
        truth[name] = (gnu_listing(entry / name), gnu_extract(entry / name, work / "gnu" / name))
        entries[name] = entry.name
    db = work / "catalog.db"
    main(["--catalog", str(db), "index", "--quiet", str(work / "mirror")])
    return db, truth, entries


SHIPPED = sorted(p.name.removesuffix(".uu") for p in (Path(__file__).parent.parent / "corpus/compressed").iterdir())
# GNU tar lists every member of these, then fails (gzip: "trailing garbage ignored", exit 2): vault lists the same
# members and flags the bytes after the stream
TAR_REJECTS = {"libarchive-test_compat_gzip_2.tgz"}
# bzip2 warns of the same ("trailing garbage after EOF ignored") and exits 0; vault flags it as for gzip
FLAGGED_ONLY_BY_VAULT = {"libarchive-test_compat_bzip2_2.tbz"}


@pytest.mark.parametrize("name", SHIPPED)
def test_other_projects_compressed_archives_are_read_as_tar_reads_them(shipped, name):
    db, truth, entries = shipped
    (rc, listing), (x_rc, extracted) = truth[name]
    _fmt, status, members = _members(db, entries[name])
    assert (rc != 0) == (name in TAR_REJECTS)
    assert (status != "ok") == (name in TAR_REJECTS | FLAGGED_ONLY_BY_VAULT)
    gnu = [(kind, safer_name(n), size, safer_name(link) if kind == "h" else link) for kind, n, size, link in listing]
    assert [_listed(m) for m in members] == gnu
    _read_back(db, _members(db, entries[name], nested=True)[2])  # the archives its members are: each verifies
    if status != "ok":  # flagged damaged: its members are refused, as a damaged .tar.zst's are
        assert status == "corrupt_stream"
        return
    assert x_rc == 0 and _read_back(db, members, safer_name) == extracted


def test_an_xz_archive_written_as_one_block_is_flagged_and_a_multi_block_one_is_not(formats):
    """GNU tar -J, bsdtar -J and tarfile write one xz block (no seek point inside it: each member is decoded from
    the archive's start); `xz -T2 --block-size` writes several, entered at the block before a member."""
    db, _, entries, _ = formats
    conn = sqlite3.connect(db)
    flagged = {entry for (entry,) in conn.execute(
        "SELECT f.entry_id FROM flags fl JOIN files f ON f.id = fl.file_id WHERE fl.kind = 'xz_one_block' "
        "AND fl.member IS NULL")}  # fmt: skip
    conn.close()
    one_block = {"gnutar-J.tar.xz", "bsdtar-J.txz", "tarfile-xz.tar.xz"}
    assert flagged == {entries[name] for name in one_block}
    for name in one_block | {"xz-blocks.tar.xz"}:  # the truth: what `xz --list` counts
        listed = subprocess.run(["xz", "--robot", "--list", _archive_path(formats, name)], capture_output=True,
                                text=True, check=True).stdout  # fmt: skip
        blocks = int(next(line for line in listed.splitlines() if line.startswith("totals")).split("\t")[2])
        assert (blocks == 1) == (name in one_block), (name, blocks)


def _archive_path(formats, name: str) -> str:
    _, _, entries, work = formats
    return str(work / "mirror" / entries[name] / name)
