"""Through `vault mount`, a read never returns a byte of a piece that does not verify: an archive and a plain file
replaced after indexing (same size, mtime kept) are read with `head -c`, `dd skip=` and random `pread`s; the
pieces that still verify read as they were, a read touching the changed piece is EIO naming the offset."""

from __future__ import annotations

import errno
import os
import random
import subprocess

import pytest
from faults.test_piece_faults import BIG, FLIPS, PIECE, big_bytes, compressed, flipped, replace_keeping_mtime, tar_bytes

from integration.test_mount import fuse, mount_of  # noqa: F401  (fixtures)

pytestmark = pytest.mark.fuse


@pytest.fixture
def damaged_mount(tmp_path, vault, mount_of):  # noqa: F811
    """make(how, where) -> (the mounted entry folder, good bytes of the member, of the plain file, flip offset)."""

    def make(how: str, where: str):
        entry = tmp_path / "m/101_pieces"
        entry.mkdir(parents=True)
        big, plain_bytes = big_bytes(), big_bytes(7)
        archive, plain = entry / "data.tar.zst", entry / "weights.bin"
        archive.write_bytes(compressed(tar_bytes(big), how, tmp_path))
        plain.write_bytes(plain_bytes)
        db = tmp_path / "c.db"
        assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
        at = FLIPS[where]
        replace_keeping_mtime(archive, compressed(tar_bytes(flipped(big, at)), how, tmp_path))
        replace_keeping_mtime(plain, flipped(plain_bytes, at))
        m = mount_of(db)
        folders = [p for p in m.point.rglob("101_pieces") if p.is_dir()]
        return folders[0], big, plain_bytes, at, m

    return make


@pytest.mark.parametrize("how", ["zstd", "pzstd", "seekable"])
def test_head_of_a_changed_first_piece_is_eio_and_prints_nothing(damaged_mount, how):
    top, big, plain_bytes, at, _ = damaged_mount(how, "first")
    for path in (top / "data.tar.zst/big.bin", top / "weights.bin"):
        r = subprocess.run(["head", "-c", "1M", str(path)], capture_output=True, timeout=60)
        assert r.returncode != 0 and r.stdout == b"", (path, len(r.stdout))
        assert "Input/output error" in r.stderr.decode()


@pytest.mark.parametrize("where", ["middle", "last"])
@pytest.mark.parametrize("how", ["zstd", "pzstd", "seekable"])
def test_dd_and_preads_read_good_pieces_and_refuse_the_changed_one(damaged_mount, how, where):
    top, big, plain_bytes, at, m = damaged_mount(how, where)
    bad = at // PIECE
    for path, good in ((top / "data.tar.zst/big.bin", big), (top / "weights.bin", plain_bytes)):
        r = subprocess.run(["head", "-c", "1M", str(path)], capture_output=True, timeout=60)
        assert r.returncode == 0 and r.stdout == good[:PIECE]
        dd = subprocess.run(["dd", f"if={path}", "bs=1M", f"skip={bad}", "count=1", "status=none"],
                            capture_output=True, timeout=60)  # fmt: skip
        assert dd.returncode != 0 and dd.stdout == b"", (path, len(dd.stdout))
        dd = subprocess.run(["dd", f"if={path}", "bs=1M", f"skip={bad - 1}", "count=1", "status=none"],
                            capture_output=True, timeout=60)  # fmt: skip
        assert dd.returncode == 0 and dd.stdout == good[(bad - 1) * PIECE : bad * PIECE]
        rng = random.Random(how + where)
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(40):
                off = rng.randrange(BIG)
                n = rng.choice([1, 4096, 131072, 3 * PIECE // 2])
                touches = off // PIECE <= bad <= (min(off + n, BIG) - 1) // PIECE
                if touches:  # EIO, or (a read begun in good pieces) a short read that stops before the bad one
                    try:
                        got = os.pread(fd, n, off)
                    except OSError as exc:
                        assert exc.errno == errno.EIO
                    else:
                        assert off + len(got) <= bad * PIECE and got == good[off : off + len(got)], (off, n)
                else:
                    assert os.pread(fd, n, off) == good[off : off + n]
            with pytest.raises(OSError):
                os.pread(fd, 16, at)
        finally:
            os.close(fd)
    log = m.log.read_text()
    assert f"offset {bad * PIECE}" in log and "big.bin" in log and "weights.bin" in log


def test_an_object_indexed_before_piece_hashes_is_refused_by_the_mount_until_vault_index(
    tmp_path,
    vault,
    mount_of,  # noqa: F811
):
    from faults.test_piece_faults import as_version_4

    entry = tmp_path / "m/101_pieces"
    entry.mkdir(parents=True)
    big = big_bytes()
    (entry / "data.tar.zst").write_bytes(compressed(tar_bytes(big), "pzstd", tmp_path))
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    as_version_4(str(db))
    m = mount_of(db)
    (top,) = [p for p in m.point.rglob("101_pieces") if p.is_dir()]
    assert (top / "data.tar.zst/notes.txt").read_bytes() == b"small member\n"  # one piece: checked by its hash
    with pytest.raises(OSError) as refused:
        (top / "data.tar.zst/big.bin").read_bytes()
    assert refused.value.errno == errno.EIO and "run `vault index`" in m.log.read_text()
    m.stop()
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    again = mount_of(db)
    (top,) = [p for p in again.point.rglob("101_pieces") if p.is_dir()]
    assert (top / "data.tar.zst/big.bin").read_bytes() == big
