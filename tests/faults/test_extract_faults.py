"""Extract under hostile archives and careless arguments: nothing lands outside, nothing leaks, one line errors."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import zstandard


def _archive(path: Path, members: list[tuple[str, bytes | None, str | None, bytes]]) -> None:
    """A .tar.zst of (name, data, link target, tarfile type); name may be bytes-as-latin-1 via surrogates."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, encoding="utf-8",
                      errors="surrogateescape") as tar:  # fmt: skip
        for name, data, link, kind in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.mtime = 1_700_000_000
            if link is not None:
                info.linkname = link
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))


def _index(tmp_path, vault) -> str:
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", "-q", str(tmp_path / "m"))
    assert r.code in (0, 5), r.err
    return db


def _snapshot(folder: Path) -> set[str]:
    return {str(p) for p in folder.rglob("*")} if folder.exists() else set()


def test_a_mirror_symlink_to_a_file_outside_is_refused_on_stdout_too(tmp_path, vault, tally):
    outside = tmp_path / "shadow"
    outside.write_text("root:SECRET-HASH:19000::::::\n")
    (tmp_path / "m/101_x").mkdir(parents=True)
    os.symlink(outside, tmp_path / "m/101_x/shadowlink")
    db = _index(tmp_path, vault)
    for output in ("-", str(tmp_path / "o")):
        tally("hostile_input")
        r = vault("--catalog", db, "extract", "101", "shadowlink", "-o", output)
        tally("secret_leak", int("SECRET-HASH" in r.out + r.err))
        assert r.code == 5 and "refusing" in r.err, (output, r.err)
        assert "SECRET-HASH" not in r.out + r.err
    tally("write_outside", int((tmp_path / "o/shadowlink").exists()))
    assert not (tmp_path / "o/shadowlink").exists()


def test_a_link_inside_the_mirror_to_a_fifo_is_never_opened(tmp_path, vault, tally):
    (tmp_path / "m/101_x").mkdir(parents=True)
    (tmp_path / "m/101_x/real.txt").write_text("x")
    db = _index(tmp_path, vault)
    os.unlink(tmp_path / "m/101_x/real.txt")
    os.mkfifo(tmp_path / "m/101_x/real.txt")  # swapped after indexing: opening it would block forever
    tally("hostile_input")
    r = subprocess.run([sys.executable, "-m", "cloudvault", "--catalog", db, "extract", "101", "real.txt", "-o", "-"],
                       capture_output=True, text=True, timeout=20)  # fmt: skip
    assert r.returncode == 5 and "not a regular file" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "links",
    [
        [("a/b/up", ".."), ("a/b/x", "up/../..")],
        [("a/b/up", ".."), ("a/b/esc", "up/../../../OUT")],
        [("a/b/up", ".."), ("a/b/up2", "up/.."), ("a/b/z", "up2/../..")],
    ],
)
def test_symlink_chains_cannot_climb_out_of_the_destination(tmp_path, vault, links, tally):
    members = [("a/b/file.txt", b"ok\n", None, tarfile.REGTYPE)]
    members += [(name, None, target, tarfile.SYMTYPE) for name, target in links]
    _archive(tmp_path / "m/019_x/chain.tar.zst", members)
    db = _index(tmp_path, vault)
    dest = tmp_path / "d" / "dest"
    dest.mkdir(parents=True)
    before = _snapshot(tmp_path / "d") - _snapshot(dest)
    tally("hostile_input")
    r = vault("--catalog", db, "extract", "019", "a", "-o", str(dest), "--keep-path")
    after = _snapshot(tmp_path / "d") - _snapshot(dest)
    tally("write_outside", len(after - before) + int((tmp_path / "OUT").exists()))
    assert r.code == 5 and "outside the destination" in r.err, r.err
    assert after == before and not (tmp_path / "OUT").exists()  # nothing written outside the destination
    for name, _ in links[1:]:
        path = dest / name
        if os.path.lexists(path):
            resolved, root = os.path.realpath(path), os.path.realpath(dest)
            assert resolved == root or resolved.startswith(root + os.sep)


def test_a_member_is_never_written_through_a_link_an_earlier_member_made(tmp_path, vault, tally):
    _archive(
        tmp_path / "m/019_x/through.tar.zst",
        [("sub/keep.txt", b"k", None, tarfile.REGTYPE), ("linkdir", None, "sub", tarfile.SYMTYPE),
         ("linkdir/x.txt", b"x", None, tarfile.REGTYPE)],
    )  # fmt: skip
    db = _index(tmp_path, vault)
    dest = tmp_path / "dest"
    tally("hostile_input")
    r = vault("--catalog", db, "extract", "019", "*", "-o", str(dest), "--keep-path")
    assert r.code == 5 and "through the symlink" in r.err and "Traceback" not in r.err
    assert not (dest / "sub/x.txt").exists()


def test_relative_and_symlinked_output_folders_keep_links_that_stay_inside(tmp_path, vault, monkeypatch):
    _archive(
        tmp_path / "m/015_x/env.tar.zst",
        [("env/bin/python3.11", b"#!elf", None, tarfile.REGTYPE),
         ("env/bin/python", None, "python3.11", tarfile.SYMTYPE)],
    )  # fmt: skip
    db = _index(tmp_path, vault)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert vault("--catalog", db, "extract", "015", "env", "--keep-path").code == 0  # default -o .
    assert os.readlink(work / "env/bin/python") == "python3.11"
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, work / "via")
    r = vault("--catalog", db, "extract", "015", "env", "--keep-path", "-o", "via/out")
    assert r.code == 0, r.err
    assert (real / "out/env/bin/python").read_bytes() == b"#!elf"


def test_non_utf8_member_names_come_back_with_their_original_bytes(tmp_path, vault):
    name = b"caf\xe9.csv".decode("utf-8", "surrogateescape")
    _archive(tmp_path / "m/018_x/latin.tar.zst", [(name, b"a,b\n", None, tarfile.REGTYPE)])
    db = _index(tmp_path, vault)
    dest = tmp_path / "o"
    r = vault("--catalog", db, "extract", "018", "caf\\xe9.csv", "-o", str(dest))
    assert r.code == 0, r.err
    assert os.listdir(os.fsencode(dest)) == [b"caf\xe9.csv"]


def test_the_same_path_twice_in_an_archive_gives_the_last_one_and_ls_shows_both(tmp_path, vault):
    _archive(
        tmp_path / "m/018_x/twice.tar.zst",
        [("same.txt", b"first\n", None, tarfile.REGTYPE), ("same.txt", b"second\n", None, tarfile.REGTYPE)],
    )
    db = _index(tmp_path, vault)
    assert vault("--catalog", db, "ls", "018", "same.txt").out.count("same.txt") == 2
    r = vault("--catalog", db, "extract", "018", "same.txt", "-o", str(tmp_path / "o"))
    assert r.code == 0, r.err
    assert (tmp_path / "o/same.txt").read_text() == "second\n"


def test_a_hardlink_is_verified_through_its_targets_hash(tmp_path, vault):
    _archive(
        tmp_path / "m/018_x/hl.tar.zst",
        [("data.bin", b"payload\n", None, tarfile.REGTYPE), ("alias.bin", None, "data.bin", tarfile.LNKTYPE)],
    )
    db = _index(tmp_path, vault)
    r = vault("--catalog", db, "extract", "018", "alias.bin", "-o", str(tmp_path / "o"))
    assert r.code == 0 and " ok" in r.out and "unverified" not in r.out
    assert (tmp_path / "o/alias.bin").read_bytes() == b"payload\n"


def test_existing_file_or_folder_destinations_are_one_line_errors(tmp_path, vault, tally):
    _archive(tmp_path / "m/018_x/x.tar.zst", [("f.txt", b"1", None, tarfile.REGTYPE)])
    db = _index(tmp_path, vault)
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    tally("bad_argument")
    r = vault("--catalog", db, "extract", "018", "f.txt", "-o", str(afile))
    tally("traceback", int("Traceback" in r.err))
    assert r.code == 2 and "is a file" in r.err and afile.read_text() == "keep me"
    (tmp_path / "o/f.txt").mkdir(parents=True)
    tally("bad_argument")
    r = vault("--catalog", db, "extract", "018", "f.txt", "-o", str(tmp_path / "o"), "--force")
    tally("traceback", int("Traceback" in r.err))
    assert r.code == 2 and "is a folder" in r.err and (tmp_path / "o/f.txt").is_dir()


def test_stale_temp_files_of_a_killed_extract_are_cleaned_and_only_those(tmp_path, vault, tally):
    _archive(tmp_path / "m/018_x/x.tar.zst", [("f.txt", b"1", None, tarfile.REGTYPE)])
    db = _index(tmp_path, vault)
    out = tmp_path / "o"
    out.mkdir()
    dead = out / ".f.txt.vault-999999999.tmp"  # no such pid: its writer was killed
    alive = out / f".g.txt.vault-{os.getpid()}.tmp"  # a live writer's
    mine = out / ".notes.tmp"  # the user's own file
    for p in (dead, alive, mine):
        p.write_text("partial")
    tally("kill")
    assert vault("--catalog", db, "extract", "018", "f.txt", "-o", str(out)).code == 0
    assert not dead.exists() and alive.exists() and mine.exists()


def test_disk_full_in_a_multi_file_extract_names_what_was_written(tmp_path, vault, tally):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    _archive(tmp_path / "m/018_x/x.tar.zst",
             [("a/small.txt", b"s" * 1000, None, tarfile.REGTYPE), ("a/big.bin", os.urandom(3 << 20), None,
                                                                    tarfile.REGTYPE)])  # fmt: skip
    db = _index(tmp_path, vault)
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        tally("corruption")
        r = vault("--catalog", db, "extract", "018", "a", "-o", str(mnt))
        assert r.code == 6 and "no space" in r.err and "small.txt" in r.err and "nothing was left" not in r.err
        assert sorted(os.listdir(mnt)) == ["small.txt"]
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_closed_pipe_is_exit_0_for_listing_commands(demo_catalog):
    for args in (["ls", "018"], ["search", "json", "--limit", "0"]):
        cmd = f"{sys.executable} -m cloudvault --catalog {demo_catalog} {' '.join(args)} | head -1 >/dev/null"
        r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True)
        assert r.returncode == 0, (args, r.stderr)
        assert "Traceback" not in r.stderr
