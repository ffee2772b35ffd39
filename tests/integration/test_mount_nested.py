"""`vault mount` of archives that hold archives: a nested archive member's folder holds its members, read (decoded
from the inner archive's start, out of the outer member's verified bytes) as `tar -xOf outer member | tar -xO` gives
them."""

from __future__ import annotations

import subprocess

import pytest
from conftest import require

from integration.test_mount import fuse, mount_of  # noqa: F401 (fixtures)

pytestmark = pytest.mark.fuse


def _inner_bytes(outer, member: str, path: str) -> bytes:
    """What GNU tar (or unzip) gives of path in the archive that member of outer is."""
    take = ["unzip", "-p", str(outer), member] if outer.suffix == ".zip" else ["tar", "-xOf", str(outer), member]
    got = outer.parent.parent.parent / "got" / member.replace("/", "_")  # outside the mirror
    got.parent.mkdir(exist_ok=True)
    got.write_bytes(subprocess.run(take, capture_output=True, check=True).stdout)
    return subprocess.run(["tar", "-xOf", str(got), path], capture_output=True, check=True).stdout


def test_nested_members_read_through_the_mount_as_tar_gives_them(tmp_path, mount_of, vault):  # noqa: F811
    require("tar")
    require("zip")
    require("unzip")
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d/small.txt").write_text("small and nested\n")
    (src / "d/big.bin").write_bytes(bytes(range(256)) * 12_000)  # 3 MB: several pieces, read in ranges
    staged = tmp_path / "staged/data"
    staged.mkdir(parents=True)
    subprocess.run(["tar", "-czf", str(staged / "inner.tar.gz"), "d"], cwd=src, check=True)
    subprocess.run(["tar", "-cJf", str(staged / "other.txz"), "d"], cwd=src, check=True)
    entry = tmp_path / "m/001_n"
    entry.mkdir(parents=True)
    subprocess.run(["tar", "--zstd", "-cf", str(entry / "outer.tar.zst"), "data"], cwd=staged.parent, check=True)
    subprocess.run(["zip", "-q", "-r", str(entry / "outer.zip"), "data"], cwd=staged.parent, check=True)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    m = mount_of(db)
    top = next(p for p in m.point.iterdir() if p.is_dir())
    for outer in ("outer.tar.zst", "outer.zip"):
        for inner in ("inner.tar.gz", "other.txz"):
            folder = top / "001_n" / outer / "data" / inner
            assert sorted(p.name for p in (folder / "d").iterdir()) == ["big.bin", "small.txt"]
            member = f"data/{inner}"
            assert (folder / "d/small.txt").read_bytes() == _inner_bytes(entry / outer, member, "d/small.txt")
            big = _inner_bytes(entry / outer, member, "d/big.bin")
            assert (folder / "d/big.bin").read_bytes() == big
            with open(folder / "d/big.bin", "rb") as fh:
                fh.seek(2_000_000)
                assert fh.read(1000) == big[2_000_000:2_001_000]
