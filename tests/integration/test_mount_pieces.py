"""Through `vault mount`, a read never returns a byte of a piece that does not verify: an archive and a plain file
replaced after indexing (same size, mtime kept) are read with `head -c`, `dd skip=` and random `pread`s; the
pieces that still verify read as they were, a read touching the changed piece is EIO naming the offset. In the
first piece the unit checked is its 64 KiB part (the catalog records their hashes): the parts before and after a
changed one read, as tarfile reads them from the archive as it was indexed."""

from __future__ import annotations

import errno
import os
import random
import subprocess

import pytest
from faults.test_piece_faults import BIG, FLIPS, PIECE, big_bytes, compressed, flipped, replace_keeping_mtime, tar_bytes

from cloudvault.pieces import PART
from integration.test_mount import fuse, mount_of  # noqa: F401  (fixtures)

pytestmark = pytest.mark.fuse


@pytest.fixture
def damaged_mount(tmp_path, vault, mount_of):  # noqa: F811
    """make(how, where) -> (the mounted entry folder, good bytes of the member, of the plain file, flip offset); where
    is a FLIPS name or an offset."""

    def make(how: str, where: str):
        entry = tmp_path / "m/101_pieces"
        entry.mkdir(parents=True)
        big, plain_bytes = big_bytes(), big_bytes(7)
        archive, plain = entry / "data.tar.zst", entry / "weights.bin"
        archive.write_bytes(compressed(tar_bytes(big), how, tmp_path))
        plain.write_bytes(plain_bytes)
        db = tmp_path / "c.db"
        assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
        at = FLIPS[where] if isinstance(where, str) else where
        replace_keeping_mtime(archive, compressed(tar_bytes(flipped(big, at)), how, tmp_path))
        replace_keeping_mtime(plain, flipped(plain_bytes, at))
        m = mount_of(db)
        folders = [p for p in m.point.rglob("101_pieces") if p.is_dir()]
        return folders[0], big, plain_bytes, at, m

    return make


@pytest.mark.parametrize("how", ["zstd", "pzstd", "seekable"])
def test_head_of_a_changed_first_piece_is_eio_and_prints_only_the_parts_before_the_changed_one(damaged_mount, how):
    top, big, plain_bytes, at, _ = damaged_mount(how, "first")
    for path, good in ((top / "data.tar.zst/big.bin", big), (top / "weights.bin", plain_bytes)):
        r = subprocess.run(["head", "-c", "1M", str(path)], capture_output=True, timeout=60)
        assert r.returncode != 0 and len(r.stdout) <= at - at % PART and r.stdout == good[: len(r.stdout)], path
        assert "Input/output error" in r.stderr.decode()


def _tarfile_view(big: bytes) -> bytes:
    """big.bin's bytes as tarfile reads them from the archive as it was indexed."""
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(tar_bytes(big))) as tar:
        return tar.extractfile("big.bin").read()


@pytest.mark.parametrize("at", [100, PIECE // 2 + 3, PIECE + 5], ids=["first-part", "rest-of-piece-0", "piece-1"])
@pytest.mark.parametrize("how", ["zstd", "pzstd", "seekable"])
def test_a_changed_byte_is_eio_at_its_part_or_piece_and_the_bytes_either_side_read(damaged_mount, how, at):
    """A byte changed in the first 64 KiB, in the rest of the first piece, or in the second piece: a read touching
    its part (first piece) or piece is EIO, logged at that offset; nothing of it is handed out; the bytes before and
    after it read as tarfile has them."""
    top, big, plain_bytes, at, m = damaged_mount(how, at)
    bad, size = (at - at % PART, PART) if at < PIECE else (at - at % PIECE, PIECE)
    for path, good in ((top / "data.tar.zst/big.bin", _tarfile_view(big)), (top / "weights.bin", plain_bytes)):
        fd = os.open(path, os.O_RDONLY)
        try:
            assert os.pread(fd, 4096, bad + size) == good[bad + size : bad + size + 4096]
            if bad:
                assert os.pread(fd, 4096, bad - 4096) == good[bad - 4096 : bad]
            for off in (at, bad, bad + size - 1):
                with pytest.raises(OSError) as refused:
                    os.pread(fd, 1, off)
                assert refused.value.errno == errno.EIO
        finally:
            os.close(fd)
        r = subprocess.run(["head", "-c", "3M", str(path)], capture_output=True, timeout=60)
        assert r.returncode != 0 and len(r.stdout) <= bad and r.stdout == good[: len(r.stdout)], path
    assert f"offset {bad}" in m.log.read_text()


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
