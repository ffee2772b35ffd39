"""How often `vault index` reads an archive's first bytes: the walk's sniff decides its format (archive/formats.py)
and hands it to the scan, which does not read them again to decide it; the scan reads them once more only as the
data it hashes."""

from __future__ import annotations

import io
import os
import subprocess

import pytest
from conftest import require

from cloudvault.archive.formats import HEAD
from cloudvault.cli.main import main
from cloudvault.tools import mirrorfs


class _CountedFile(io.FileIO):
    """A file that adds up, per path, how many of its first HEAD bytes were read (every read, in any pass)."""

    heads: dict[str, int] = {}

    def _count(self, at: int, n: int) -> None:
        if at < HEAD and n:
            self.heads[self.name] = self.heads.get(self.name, 0) + min(at + n, HEAD) - at

    def read(self, size=-1):
        at = self.tell()
        data = super().read(size)
        self._count(at, len(data or b""))
        return data

    def readinto(self, buffer):
        at = self.tell()
        n = super().readinto(buffer)
        self._count(at, n or 0)
        return n

    def readall(self):
        return self.read(-1)


@pytest.mark.parametrize("name,command", [
    ("a.tar.zst", "tar --zstd -cf {out} big.bin"),
    ("a.tar", "tar -cf {out} big.bin"),
])  # fmt: skip
def test_an_archives_first_bytes_are_sniffed_once(tmp_path, monkeypatch, name, command):
    require("tar")
    src, data = tmp_path / "src", tmp_path / "m/018_x"
    src.mkdir()
    data.mkdir(parents=True)
    (src / "big.bin").write_bytes(os.urandom(3 * HEAD))
    subprocess.run(command.format(out=data / name), shell=True, cwd=src, check=True)
    _CountedFile.heads = {}
    monkeypatch.setattr(mirrorfs.LocalMirror, "open", lambda self, path, raw=None: _CountedFile(self.full(path, raw)))
    assert main(["--catalog", str(tmp_path / "c.db"), "index", "-q", "--workers", "1", str(tmp_path / "m")]) == 0
    # the walk's sniff (HEAD bytes), then the scan's pass over every byte: no second sniff in between (3 * HEAD)
    (read,) = _CountedFile.heads.values()
    assert list(_CountedFile.heads) == [os.fsencode(data / name)] and 2 * HEAD <= read < 3 * HEAD
