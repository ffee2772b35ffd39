"""io.landing, the one safe writer into a folder: a member never lands outside it, whatever its path, its links or
the links earlier members made; an env's absolute links into its old prefix move with it."""

from __future__ import annotations

import os

import pytest

from cloudvault.errors import UnsafeMember
from cloudvault.io.landing import Landing, write_chunks
from cloudvault.models import Member


def member(path: str, kind: str = "file", link: str | None = None) -> Member:
    return Member(1, "014", path, None, kind, 3, 0o644, 0, None, link, "a.tar.zst", 1, 0)


def test_a_dotdot_member_is_refused_before_anything_is_written(tmp_path):
    run = Landing(tmp_path / "run", name="the run folder")
    with pytest.raises(UnsafeMember, match="nothing was written"):
        run.path_for(member("../escape.txt"))
    with pytest.raises(UnsafeMember, match="outside the run folder"):
        run.path_for(member("inputs/x"), "../../escape.txt")
    assert not (tmp_path / "escape.txt").exists() and os.listdir(tmp_path / "run") == []


def test_nothing_is_written_through_a_symlink_already_in_the_folder(tmp_path):
    land = Landing(tmp_path / "out")
    (tmp_path / "out" / "sub").mkdir()
    os.symlink("sub", tmp_path / "out" / "up")  # inside, but an earlier member's link: never written through
    with pytest.raises(UnsafeMember, match="through the symlink"):
        land.path_for(member("up/x"))


def test_a_symlink_chain_cannot_climb_out_and_an_absolute_link_needs_the_option(tmp_path):
    land = Landing(tmp_path / "out", link_hint=" (--allow-outside-links to create it anyway)")
    os.symlink("..", tmp_path / "out" / "up")
    with pytest.raises(UnsafeMember, match="points outside the destination"):
        land.symlink_target(member("x", "symlink", "up/.."), land.path_for(member("x")))
    with pytest.raises(UnsafeMember, match="--allow-outside-links"):
        land.symlink_target(member("y", "symlink", "/etc/passwd"), land.path_for(member("y")))
    assert land.symlink_target(member("z", "symlink", "sub/file"), land.path_for(member("z"))) == "sub/file"


def test_an_env_link_into_its_old_prefix_moves_to_the_new_one(tmp_path):
    env = Landing(tmp_path / "env", name="the env", outcome="nothing was restored")
    old, new = "/mnt/filesystem-h8/miniforge3/envs/neo", str(tmp_path / "env")
    out = env.path_for(member("bin/python"), "bin/python")
    assert env.symlink_target(member("bin/python", "symlink", f"{old}/bin/python3.11"), out, (old, new)) == \
        f"{new}/bin/python3.11"  # fmt: skip
    assert env.symlink_target(member("bin/python", "symlink", old), out, (old, old)) == old  # restored in place
    with pytest.raises(UnsafeMember, match="points outside the env"):
        env.symlink_target(member("bin/sh", "symlink", "/bin/sh"), out, (old, new))


def test_a_hardlink_must_name_a_regular_file_already_landed_inside(tmp_path):
    land = Landing(tmp_path / "env", name="the env")
    write_chunks([b"abc"], land.path_for(member("lib/a.so"), "lib/a.so"))
    os.symlink("a.so", tmp_path / "env" / "lib" / "b.so")
    assert land.hardlink_source(member("lib/c.so", "hardlink", "lib/a.so"), "lib/a.so").endswith("lib/a.so")
    with pytest.raises(UnsafeMember, match="not a file"):
        land.hardlink_source(member("lib/d.so", "hardlink", "lib/b.so"), "lib/b.so")
    with pytest.raises(UnsafeMember, match="outside the env"):
        land.hardlink_source(member("lib/e.so", "hardlink", "../x"), "../x")
    assert (tmp_path / "env" / "lib" / "a.so").read_bytes() == b"abc"


def test_a_folder_checked_before_is_checked_again_once_a_symlink_has_landed(tmp_path):
    land = Landing(tmp_path / "out")
    assert land.path_for(member("sub/a")).endswith("sub/a")  # sub checked (and remembered)
    out = land.path_for(member("sub", "symlink", "other"))
    os.symlink(land.symlink_target(member("sub", "symlink", "other"), out), out)
    with pytest.raises(UnsafeMember, match="through the symlink"):
        land.path_for(member("sub/b"))
    os.symlink("/etc", tmp_path / "out" / "l")  # a link that did not land through here: out itself is looked at
    land.path_for(member("x"))
    with pytest.raises(UnsafeMember, match="land outside"):
        land.path_for(member("l"))
