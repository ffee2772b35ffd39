"""Hostile and damaged archives inside archives (archive/nested.py): a damaged inner archive is a named flag on the
outer member, its readable part listed and its members refused as a damaged archive's are; a nested bomb is refused
by the zip bomb limits in one line; an unsafe name inside is flagged as in an outer archive; an outer archive whose
bytes changed under the same size and mtime gives no nested byte out (exit 5, naming it)."""

from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import tarfile

from conftest import require


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


WORDS = b"alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu "
MEMBERS = {f"m/{i:02d}.txt": (WORDS * (3000 + 500 * i))[: 150_000 + 7919 * i] for i in range(12)}


def _mirror(tmp_path, inner_name: str, inner: bytes, outer: str = "outer.tar.zst") -> tuple:
    """An entry holding `outer` (made by GNU tar) whose member data/<inner_name> holds inner's bytes; indexed."""
    require("tar")
    staged = tmp_path / "staged"
    (staged / "data").mkdir(parents=True)
    (staged / "data" / inner_name).write_bytes(inner)
    (staged / "data/plain.txt").write_text("outside the inner archive\n")
    entry = tmp_path / "m/018_n"
    entry.mkdir(parents=True)
    flags = ["--zstd"] if outer.endswith(".zst") else []
    subprocess.run(["tar", *flags, "-cf", str(entry / outer), "data"], cwd=staged, check=True)
    return entry / outer, str(tmp_path / "c.db")


def _flags(db: str) -> list[tuple[str, str | None, str]]:
    conn = sqlite3.connect(db)
    found = conn.execute("SELECT kind, member, detail FROM flags ORDER BY id").fetchall()
    conn.close()
    return found


def _paths(db: str, prefix: str) -> set[str]:
    conn = sqlite3.connect(db)
    found = {p for (p,) in conn.execute("SELECT path FROM members WHERE path LIKE ?", (prefix + "%",))}
    conn.close()
    return found


def test_a_truncated_inner_archive_is_flagged_on_its_member_and_its_readable_part_listed(tmp_path, vault, tally):
    tally("corruption")
    import gzip

    whole = gzip.compress(_tar(MEMBERS))
    outer, db = _mirror(tmp_path, "inner.tar.gz", whole[: len(whole) // 2])
    r = vault("--catalog", db, "index", str(tmp_path / "m"))
    assert r.code == 5, r.err  # damage found, as for a truncated outer archive
    assert ("truncated", "data/inner.tar.gz/") in [(kind, member) for kind, member, _ in _flags(db)]
    listed = _paths(db, "data/inner.tar.gz/")
    assert 0 < len(listed) < len(MEMBERS) and "data/inner.tar.gz/m/00.txt" in listed
    cut = vault("--catalog", db, "extract", "018", "data/inner.tar.gz/m/00.txt", "-o", "-")
    assert cut.code == 5 and cut.out == "" and "data/inner.tar.gz" in cut.err and len(cut.err.splitlines()) == 1
    own = vault("--catalog", db, "extract", "018", "data/inner.tar.gz", "-o", str(tmp_path / "own"))
    assert own.code == 0 and (tmp_path / "own/inner.tar.gz").read_bytes() == whole[: len(whole) // 2]  # it is whole
    assert vault("--catalog", db, "extract", "018", "data/plain.txt", "-o", "-").out == "outside the inner archive\n"


def test_an_inner_gzip_whose_crc_fails_is_bad_crc_its_members_refused_the_outer_member_still_whole(
    tmp_path, vault, tally
):
    tally("corruption")
    import gzip

    inner = bytearray(gzip.compress(_tar(MEMBERS)))
    inner[-8] ^= 0xFF  # the CRC32 of the trailer
    _, db = _mirror(tmp_path, "inner.tgz", bytes(inner), outer="outer.tar")
    assert vault("--catalog", db, "index", str(tmp_path / "m")).code == 5
    assert [(kind, member) for kind, member, _ in _flags(db)] == [("bad_crc", "data/inner.tgz/")]
    r = vault("--catalog", db, "extract", "018", "data/inner.tgz/m/03.txt", "-o", "-")
    assert r.code == 5 and r.out == "" and "data/inner.tgz" in r.err
    own = vault("--catalog", db, "extract", "018", "data/inner.tgz", "-o", str(tmp_path / "own"))
    assert own.code == 0 and (tmp_path / "own/inner.tgz").read_bytes() == bytes(inner)  # as tar -xOf gives it


def test_a_nested_bomb_is_refused_by_the_zip_bomb_limits_in_one_line(tmp_path, vault, tally):
    tally("hostile_input")
    require("zstd")
    work = tmp_path / "bomb"
    work.mkdir()
    with open(work / "zeros", "wb") as fh:
        fh.truncate((1 << 30) + (64 << 20))  # 1.06 GiB of zeros: a few hundred KB as zstd
    subprocess.run(["tar", "--zstd", "-cf", str(work / "bomb.tar.zst"), "zeros"], cwd=work, check=True)
    bomb = (work / "bomb.tar.zst").read_bytes()
    os.unlink(work / "zeros")
    _, db = _mirror(tmp_path, "bomb.tar.zst", bomb, outer="outer.tar")
    r = vault("--catalog", db, "index", str(tmp_path / "m"))
    assert r.code == 5, r.err
    refused = [(member, detail) for kind, member, detail in _flags(db) if kind == "nested_bomb"]
    assert len(refused) == 1 and refused[0][0] == "data/bomb.tar.zst/" and "\n" not in refused[0][1]
    assert "bomb refused" in refused[0][1] and "1000x" in refused[0][1]
    assert _paths(db, "data/bomb.tar.zst/") == set()  # the member past the limit was not recorded
    assert "data/bomb.tar.zst" in _paths(db, "data/")  # the outer member keeps its row


def test_an_unsafe_name_inside_an_inner_archive_is_flagged_as_in_an_outer_one(tmp_path, vault, tally):
    tally("hostile_input")
    inner = _tar({"ok.txt": b"fine\n", "../../escape.txt": b"out\n"})
    _, db = _mirror(tmp_path, "inner.tar", inner)
    assert vault("--catalog", db, "index", str(tmp_path / "m")).code == 5
    unsafe = [member for kind, member, _ in _flags(db) if kind == "unsafe_member"]
    assert unsafe == ["data/inner.tar/../../escape.txt"]
    out = tmp_path / "out"
    r = vault("--catalog", db, "extract", "018", "data/inner.tar/ok.txt", "-o", str(out))
    assert r.code == 0 and (out / "ok.txt").read_text() == "fine\n"


def test_an_outer_archive_changed_under_the_same_size_and_mtime_gives_no_nested_byte(tmp_path, vault, tally):
    tally("corruption")
    import gzip

    inner = gzip.compress(_tar(MEMBERS))
    outer, db = _mirror(tmp_path, "inner.tgz", inner, outer="outer.tar")
    assert vault("--catalog", db, "index", str(tmp_path / "m")).code == 0
    data = bytearray(outer.read_bytes())
    at = bytes(data).index(inner[:64]) + len(inner) // 3  # inside the inner archive's compressed bytes
    data[at] ^= 0x55
    st = outer.stat()
    outer.write_bytes(bytes(data))
    os.utime(outer, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = vault("--catalog", db, "extract", "018", "data/inner.tgz/m/11.txt", "-o", "-")
    assert r.code == 5 and r.out == "", r.err
    assert "data/inner.tgz" in r.err and len(r.err.strip().splitlines()) == 1, r.err
