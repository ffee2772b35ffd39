"""Archives inside archives (one level): a member of a tar-family archive or of a zip whose bytes are a tar, plain or
compressed, is indexed once more as an archive. Its members get rows with a path through the outer member, BLAKE3
and piece hashes, the secret scan, search, ls, extract and verify, as a member of the outer archive does. Truth is
GNU tar and Info-ZIP reading the inner archive as `tar -xOf outer member` (or `unzip -p`) gives it."""

from __future__ import annotations

import sqlite3
import subprocess
import zipfile
from pathlib import Path

import blake3
import pytest
from conftest import require
from corpus.build import gnu_extract, gnu_listing

from cloudvault.cli.main import main
from integration.test_formats import LETTERS
from tests.pieces_oracle import blob_length

pytestmark = pytest.mark.tar
# the inner archive's name -> how GNU tar makes it from src (run in the tree's parent)
INNERS = {
    "inner.tar.gz": "tar -czf {out} src",
    "inner.tar.bz2": "tar -cjf {out} src",
    "inner.tar.xz": "tar -cJf {out} src",
    "inner.tar.zst": "tar --zstd -cf {out} src",
    "inner.tar": "tar -cf {out} src",
}
# the outer archive's name -> how it is made from the folder `outer` holding data/<inner> (run in outer)
OUTERS = {
    "outer.tar.zst": "tar --zstd -cf {out} data",
    "outer.tar": "tar -cf {out} data",
    "outer.tar.gz": "tar -czf {out} data",
    "outer.tar.bz2": "tar -cjf {out} data",
    "outer.tar.xz": "tar -cJf {out} data",
    "outer.zip": "zip -q -r {out} data",  # Info-ZIP: deflated (a tar compresses; a .tar.gz is stored as it is)
    "outer-stored.zip": "python",  # Python's zipfile, every member stored
}
PAIRS = [(outer, inner) for outer in OUTERS for inner in INNERS]


def _tree(src: Path) -> None:
    """A folder, a long name, a symlink, a 1.5 MiB member (two pieces), a key, and an archive one level deeper."""
    (src / "docs/deep").mkdir(parents=True)
    (src / "docs/readme.txt").write_text("hello from inside\n")
    (src / "docs/deep/nested-long-name.txt").write_text("long\n")
    (src / "docs/link").symlink_to("readme.txt")
    block = bytes(range(256)) * 64
    (src / "big.bin").write_bytes(b"".join(block[i % 251 :] + block[: i % 251] for i in range(96)))
    (src / "key.env").write_text("aws_access_key_id = AKIA" + "QRSTUVWXYZABCDEF\n")
    deeper = src.parent / "deeper"
    (deeper / "d").mkdir(parents=True)
    (deeper / "d/too-deep.txt").write_text("two levels down\n")
    subprocess.run(["tar", "-czf", str(src / "innermost.tar.gz"), "d"], cwd=deeper, check=True)


def _outer(name: str, work: Path, out: Path) -> None:
    """The outer archive `name` of work's data/ folder, as OUTERS makes it."""
    how = OUTERS[name]
    if how == "python":
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
            for path in sorted((work / "data").rglob("*")):
                zf.write(path, path.relative_to(work).as_posix())
        return
    subprocess.run(how.format(out=out), shell=True, cwd=work, check=True, capture_output=True)


def outer_member(outer: Path, member: str) -> bytes:
    """The member's bytes as GNU tar (or Info-ZIP unzip) gives them out of the outer archive."""
    command = ["unzip", "-p"] if outer.suffix == ".zip" else ["tar", "-xOf"]
    return subprocess.run([*command, str(outer), member], capture_output=True, check=True).stdout


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    """Every outer x inner pair in an entry of its own (outer/data/<inner>), indexed once; with GNU tar's listing
    and extraction of each inner archive as it comes out of the outer one."""
    for tool in ("tar", "zstd", "xz", "bzip2", "gzip", "zip", "unzip"):
        require(tool)
    work = tmp_path_factory.mktemp("nested")
    _tree(work / "src")
    inners = {}
    for name, how in INNERS.items():
        subprocess.run(how.format(out=work / name), shell=True, cwd=work, check=True, capture_output=True)
        inners[name] = work / name
    entries, truth = {}, {}
    for i, (outer, inner) in enumerate(PAIRS):
        staged = work / "staged" / f"{i}"
        (staged / "data").mkdir(parents=True)
        (staged / "data" / inner).write_bytes(inners[inner].read_bytes())
        entry = work / "mirror" / f"{i:03d}_n"
        entry.mkdir(parents=True)
        _outer(outer, staged, entry / outer)
        got = work / "got" / f"{i}" / inner
        got.parent.mkdir(parents=True)
        got.write_bytes(outer_member(entry / outer, f"data/{inner}"))
        truth[outer, inner] = (gnu_listing(got), gnu_extract(got, work / "gnu" / f"{i}"), got)
        entries[outer, inner] = entry.name
    db = work / "catalog.db"
    assert main(["--catalog", str(db), "index", "--quiet", str(work / "mirror")]) == 0
    return db, entries, truth, work


def _rows(db: Path, entry: str, where: str = "", args: tuple = ()) -> list[sqlite3.Row]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = conn.execute("SELECT mb.* FROM members mb JOIN archives a ON a.id = mb.archive_id JOIN files f "
                        f"ON f.id = a.file_id WHERE f.entry_id = ? {where} ORDER BY mb.data_offset",
                        (entry, *args)).fetchall()  # fmt: skip
    conn.close()
    return rows


@pytest.mark.parametrize(("outer", "inner"), PAIRS)
def test_the_inner_archive_s_members_are_rows_through_the_outer_member(nested, outer, inner):
    db, entries, truth, _ = nested
    (rc, listing), _, _ = truth[outer, inner]
    prefix = f"data/{inner}/"
    rows = _rows(nested[0], entries[outer, inner], "AND mb.path LIKE ?", (prefix + "%",))
    got = [(LETTERS[r["type"]], r["path"][len(prefix) :].encode(), r["size"] if r["type"] == "file" else None,
            (r["link_target"] or "").encode() or None) for r in rows]  # fmt: skip
    assert rc == 0 and got == [(kind, name.rstrip(b"/"), size, link) for kind, name, size, link in listing]
    big = next(r for r in rows if r["path"] == prefix + "src/big.bin")
    assert big["blake3"] and big["pieces"] and len(big["pieces"]) == blob_length(2)  # two pieces of 1 MiB


@pytest.mark.parametrize(("outer", "inner"), PAIRS)
def test_the_outer_member_keeps_its_own_row_and_hash(nested, outer, inner):
    db, entries, truth, _ = nested
    (row,) = _rows(db, entries[outer, inner], "AND mb.path = ?", (f"data/{inner}",))
    assert row["type"] == "file" and row["blake3"] == blake3.blake3(truth[outer, inner][2].read_bytes()).hexdigest()


@pytest.mark.parametrize(("outer", "inner"), PAIRS)
def test_vault_extract_of_a_nested_member_writes_what_tar_gives(nested, outer, inner, tmp_path):
    db, entries, truth, work = nested
    _, (x_rc, extracted), _ = truth[outer, inner]
    out = tmp_path / "out"
    for path in (f"data/{inner}/src/big.bin", f"{outer}/data/{inner}/src/docs/readme.txt"):
        assert main(["--catalog", str(db), "extract", entries[outer, inner], path, "-o", str(out)]) == 0
    gnu = work / "gnu" / str(PAIRS.index((outer, inner)))
    assert x_rc == 0 and (out / "big.bin").read_bytes() == (gnu / "src/big.bin").read_bytes()
    assert (out / "readme.txt").read_bytes() == (gnu / "src/docs/readme.txt").read_bytes()
    assert blake3.blake3((out / "big.bin").read_bytes()).hexdigest() == extracted[b"src/big.bin"]


def test_ls_search_grep_and_verify_see_nested_members_in_every_pair(nested, capsys):
    db, entries, _, _ = nested
    capsys.readouterr()
    assert main(["--catalog", str(db), "verify"]) == 0
    capsys.readouterr()
    assert main(["--catalog", str(db), "search", "nested-long-name"]) == 0
    out = capsys.readouterr().out
    assert all(f"data/{inner}/src/docs/deep/nested-long-name.txt" in out for _, inner in PAIRS), out
    main(["--catalog", str(db), "grep", "-F", "hello from inside"])
    out = capsys.readouterr().out
    assert all(f"{entries[pair]}:{pair[0]}::data/{pair[1]}/src/docs/readme.txt:1:" in out for pair in PAIRS), out
    for outer, inner in PAIRS[:: len(INNERS) + 1]:  # one pair of each outer format, each inner format once
        assert main(["--catalog", str(db), "ls", entries[outer, inner]]) == 0
        assert f"data/{inner}/src/docs/readme.txt" in capsys.readouterr().out


def test_a_secret_in_a_nested_member_is_flagged_as_in_an_outer_member(nested):
    db, entries, _, _ = nested
    conn = sqlite3.connect(db)
    flagged = {(entry, member) for entry, member in conn.execute(
        "SELECT f.entry_id, fl.member FROM flags fl JOIN files f ON f.id = fl.file_id WHERE fl.kind = 'secret'")}
    conn.close()  # fmt: skip
    assert flagged == {(entries[pair], f"data/{pair[1]}/src/key.env") for pair in PAIRS}


def test_only_one_level_an_archive_in_the_inner_archive_stays_a_plain_member(nested):
    db, entries, _, _ = nested
    for pair in PAIRS:
        deeper = f"data/{pair[1]}/src/innermost.tar.gz"
        assert [r["type"] for r in _rows(db, entries[pair], "AND mb.path = ?", (deeper,))] == ["file"]
        assert _rows(db, entries[pair], "AND mb.path LIKE ?", (deeper + "/%",)) == []


def test_reindex_of_the_unchanged_mirror_reads_nothing_and_changing_the_outer_changes_its_nested_rows(
    tmp_path, vault
):
    require("tar")
    src = tmp_path / "src"
    _tree(src)
    subprocess.run(["tar", "-czf", str(tmp_path / "inner.tgz"), "src"], cwd=tmp_path, check=True)
    (tmp_path / "o/data").mkdir(parents=True)
    (tmp_path / "o/data/inner.tgz").write_bytes((tmp_path / "inner.tgz").read_bytes())
    entry = tmp_path / "m/001_x"
    entry.mkdir(parents=True)
    subprocess.run(["tar", "--zstd", "-cf", str(entry / "outer.tar.zst"), "data"], cwd=tmp_path / "o", check=True)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", str(tmp_path / "m")).code == 0
    before = [tuple(r) for r in _rows(Path(db), "001_x")]
    assert any(r[2] == "data/inner.tgz/src/docs/readme.txt" for r in before)
    again = vault("--catalog", db, "index", str(tmp_path / "m"))
    assert again.code == 0 and " 0 read (" in again.out and "0 archives, 0 members" in again.out, again.out
    assert [tuple(r) for r in _rows(Path(db), "001_x")] == before
    (src / "docs/readme.txt").unlink()
    (src / "docs/changed.txt").write_text("new\n")
    subprocess.run(["tar", "-czf", str(tmp_path / "o/data/inner.tgz"), "src"], cwd=tmp_path, check=True)
    subprocess.run(["tar", "--zstd", "-cf", str(entry / "outer.tar.zst"), "data"], cwd=tmp_path / "o", check=True)
    assert vault("--catalog", db, "index", str(tmp_path / "m")).code == 0
    paths = {r["path"] for r in _rows(Path(db), "001_x")}
    assert "data/inner.tgz/src/docs/changed.txt" in paths and "data/inner.tgz/src/docs/readme.txt" not in paths
    diff = vault("--catalog", db, "diff")
    assert diff.code == 0 and "data/inner.tgz/src/docs/changed.txt" in diff.out, diff.out
    assert "data/inner.tgz/src/docs/readme.txt" in diff.out, diff.out
    (entry / "notes.txt").write_text("the outer archive is gone\n")
    (entry / "outer.tar.zst").unlink()
    assert vault("--catalog", db, "index", "--prune", str(tmp_path / "m")).code == 0  # all it indexed is gone
    assert _rows(Path(db), "001_x") == []


@pytest.mark.parametrize("outer", ["outer.tar.zst", "outer.tar.gz", "outer.tar"])
def test_a_member_too_large_to_keep_is_read_again_through_the_outer_archive(tmp_path, vault, monkeypatch, outer):
    """A tar member kept as the walk reads it is the usual way; one past KEEP_NESTED is read again, once the walk
    is over, through the outer archive's frames or seek points: the same rows, the same bytes out."""
    from cloudvault.archive import scan

    monkeypatch.setattr(scan, "KEEP_NESTED", 0)
    _tree(tmp_path / "src")
    (tmp_path / "o/data").mkdir(parents=True)
    subprocess.run(["tar", "-cJf", str(tmp_path / "o/data/inner.txz"), "src"], cwd=tmp_path, check=True)
    entry = tmp_path / "m/001_x"
    entry.mkdir(parents=True)
    _outer(outer, tmp_path / "o", entry / outer)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", str(tmp_path / "m")).code == 0
    got = tmp_path / "inner.txz"
    got.write_bytes(outer_member(entry / outer, "data/inner.txz"))
    (rc, listing) = gnu_listing(got)
    rows = _rows(Path(db), "001_x", "AND mb.path LIKE 'data/inner.txz/%'")
    assert rc == 0 and [r["path"] for r in rows] == [f"data/inner.txz/{name.decode().rstrip('/')}"
                                                     for _, name, _, _ in listing]  # fmt: skip
    out = tmp_path / "out"
    assert vault("--catalog", db, "extract", "001", "data/inner.txz/src/big.bin", "-o", str(out)).code == 0
    truth = subprocess.run(["tar", "-xOf", str(got), "src/big.bin"], capture_output=True, check=True).stdout
    assert (out / "big.bin").read_bytes() == truth
