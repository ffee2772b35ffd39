"""Archives the index benches' tests read, made by tarfile and the zstd CLI (tools vault did not write)."""

from __future__ import annotations

import subprocess
import tarfile

import pytest
from conftest import require


@pytest.fixture
def tarfile_archive(tmp_path):
    """(a .tar.zst of 300 members of 0 to 1495 bytes that tarfile wrote, their names as tarfile lists them)."""
    src = tmp_path / "a.tar"
    with tarfile.open(src, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(300):
            (tmp_path / "m").write_bytes(b"y" * (i * 5))
            tar.add(tmp_path / "m", arcname=f"logs/{i:03d}/rank{i:03d}.log")
    subprocess.run([require("zstd"), "-q", str(src), "-o", str(tmp_path / "a.tar.zst")], check=True)
    with tarfile.open(src) as tar:
        names = sorted(m.name for m in tar.getmembers())
    (tmp_path / "m").unlink()
    src.unlink()
    return tmp_path / "a.tar.zst", names
