"""Zip members through the mount: a .zip's and a .conda's nested members read as unzip -p gives them."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from conftest import require, vault_subprocess
from zips import conda_package, info_zip, partly_encrypted_zip, zip_tree

pytestmark = pytest.mark.fuse


def _mounted(point) -> bool:
    return any(line.split()[1] == str(point) for line in open("/proc/mounts"))


@pytest.fixture
def mirror_mount(tmp_path):
    require("fusermount3")
    require("zip")
    require("unzip")
    if os.environ.get("CI") != "true":  # CI must have the mount extra: there its absence fails the test
        pytest.importorskip("mfusepy")
    src = zip_tree(tmp_path / "src")
    (tmp_path / "m/018_x/data").mkdir(parents=True)
    archive = info_zip(src, tmp_path / "m/018_x/data/bundle.zip")
    pkg = {"lib/foo.py": b"X = 1\n" * 999}
    conda_package(tmp_path / "m/018_x/data/foo-1-0.conda", "foo-1-0", pkg, {"info/a": b"{}"})
    partly_encrypted_zip(tmp_path / "src_enc", tmp_path / "m/018_x/data/part.zip")
    db = tmp_path / "c.db"
    assert vault_subprocess("--catalog", str(db), "index", "-q", str(tmp_path / "m")).returncode == 0
    point = tmp_path / "mnt"
    point.mkdir()
    done = vault_subprocess("--catalog", str(db), "mount", str(point))
    assert done.returncode == 0, done.stderr
    try:
        yield archive, point
    finally:
        if _mounted(point):
            subprocess.run(["fusermount3", "-u", "-z", str(point)], check=False)
        time.sleep(0.2)


def test_zip_members_read_through_the_mount_as_unzip_gives_them(mirror_mount):
    archive, point = mirror_mount
    found = {p.relative_to(point).as_posix(): p for p in point.rglob("*")}
    for name in ("logs/run.log", "dumps/big.bin", "유니코드_결과.csv"):
        path = next(p for rel, p in found.items() if rel.endswith(f"bundle.zip/{name}"))
        truth = subprocess.run(["unzip", "-p", str(archive), name], capture_output=True, check=True).stdout
        assert path.read_bytes() == truth, name
    big = next(p for rel, p in found.items() if rel.endswith("bundle.zip/dumps/big.bin"))
    with open(big, "rb") as fh:  # a range in its middle: the pieces that cover it, verified
        fh.seek(3 << 20)
        truth = subprocess.run(["unzip", "-p", str(archive), "dumps/big.bin"], capture_output=True).stdout
        assert fh.read(1000) == truth[3 << 20 : (3 << 20) + 1000]
    nested = next(p for rel, p in found.items() if rel.endswith("pkg-foo-1-0.tar.zst/lib/foo.py"))
    assert nested.read_bytes() == b"X = 1\n" * 999


def test_an_encrypted_member_is_refused_by_the_mount_and_its_plain_neighbour_read(mirror_mount):
    archive, point = mirror_mount
    found = {p.relative_to(point).as_posix(): p for p in point.rglob("*")}
    plain = next(p for rel, p in found.items() if rel.endswith("part.zip/plain.txt"))
    assert plain.read_bytes() == b"for everyone\n"
    secret = next(p for rel, p in found.items() if rel.endswith("part.zip/secret.txt"))
    assert secret.stat().st_size == 7  # as the central directory says
    with pytest.raises(OSError):
        secret.read_bytes()
