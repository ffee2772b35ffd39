"""`vault mount` of a mirror holding tar archives in other formats than .tar.zst: each is a folder of its members,
read (from the seek point before each read) as `tar -x` gives them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import require

from integration.test_mount import fuse, mount_of  # noqa: F401 (fixtures)

pytestmark = pytest.mark.fuse


def test_members_of_tgz_tbz2_txz_and_tar_read_through_the_mount_as_tar_gives_them(tmp_path, mount_of, vault):  # noqa: F811
    require("tar")
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d/small.txt").write_text("small\n")
    (src / "d/big.bin").write_bytes(bytes(range(256)) * 20_000)  # 5 MB: several pieces, read in ranges
    entry = tmp_path / "m/001_f"
    entry.mkdir(parents=True)
    for name, flag in (("a.tgz", "-z"), ("b.tar.bz2", "-j"), ("c.txz", "-J"), ("d.tar", "")):
        subprocess.run(["tar", *([flag] if flag else []), "-C", str(src), "-cf", str(entry / name), "d"], check=True)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    m = mount_of(db)
    top = next(p for p in m.point.iterdir() if p.is_dir())
    for name in ("a.tgz", "b.tar.bz2", "c.txz", "d.tar"):
        folder = top / "001_f" / name
        assert sorted(p.name for p in (folder / "d").iterdir()) == ["big.bin", "small.txt"]
        assert (folder / "d/small.txt").read_text() == "small\n"
        with open(folder / "d/big.bin", "rb") as fh:
            fh.seek(3_000_000)
            assert fh.read(1000) == ((src / "d/big.bin").read_bytes())[3_000_000:3_001_000]
        assert (folder / "d/big.bin").read_bytes() == (src / "d/big.bin").read_bytes()
        assert Path(str(folder) + ".raw").read_bytes() == (entry / name).read_bytes()
