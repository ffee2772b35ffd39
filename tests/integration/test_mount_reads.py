"""The mount's read path costs what the bytes cost: decoded frames in private memory (no shared-memory page
faults), verified pieces handed to FUSE straight from where they were decoded and checked, and listings that
carry each entry's attributes so the lookups after them never reach the mount process."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.test_mount import fuse  # noqa: F401  (fixture)


def _rss_shmem_kib() -> int:
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("RssShmem"))


def test_decoded_frames_are_private_memory_not_shared_memory():
    """A frame's buffer is a private anonymous mapping: its pages fault in as plain anonymous memory, never as
    shmem, which costs about twice as much per page to fault in."""
    from cloudvault.mount.frames import FrameBuffers

    before = _rss_shmem_kib()
    buffer = FrameBuffers(0).take(8 << 20)
    for at in range(0, len(buffer), 4096):
        buffer[at] = 1
    assert _rss_shmem_kib() - before < 1024, "the frame's pages are shared memory"


def _pzstd_catalog(tmp_path, vault, members: dict[str, bytes], step: int = 1 << 20) -> Path:
    """A catalog of one multi-frame archive (as pzstd writes, of frames of step bytes raw, 1 MiB unless told) holding
    members, as tarfile wrote them."""
    import io
    import tarfile

    import zstandard

    entry = tmp_path / "mirror" / "018_reads"
    entry.mkdir(parents=True)
    raw = tmp_path / "reads.tar"
    with tarfile.open(raw, "w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tar = raw.read_bytes()
    frames = [
        zstandard.ZstdCompressor(write_checksum=True).compress(tar[at : at + step]) for at in range(0, len(tar), step)
    ]
    (entry / "reads.tar.zst").write_bytes(b"".join(frames))
    db = tmp_path / "catalog.db"
    assert vault("--catalog", str(db), "index", "--quiet", str(tmp_path / "mirror")).code == 0
    return db


def _sources(db: Path, cache_bytes: int):
    from cloudvault.catalog.db import open_shared_reader
    from cloudvault.io.members import PieceCache
    from cloudvault.mount.frames import FrameCache, Sources
    from cloudvault.mount.tree import build_tree

    conn = open_shared_reader(str(db))
    tree = build_tree(conn)
    return conn, tree, Sources(conn, FrameCache(cache_bytes), tree.lock, PieceCache(64 << 20))


def _node(tree, name: str):
    (path,) = [p for p in tree.nodes if p.endswith("/reads.tar.zst") and tree.nodes[p].is_dir]
    return tree.lookup(f"{path}/{name}")


def test_a_piece_checked_where_its_frame_was_decoded_is_checked_again_once_that_memory_holds_another_frame(
    tmp_path, vault
):
    """The frame cache may let a frame go while the piece cache still says a piece of it verified: its memory then
    decodes other frames, so the piece is decoded and checked again, never read from where it was."""
    import gc
    import os

    members = {f"part{i:02d}.bin": os.urandom(300_000) * 3 for i in range(24)}  # 900 KB each, frames of 1 MiB
    db = _pzstd_catalog(tmp_path, vault, members)
    conn, tree, sources = _sources(db, 16 << 20)  # 14 frames at a time and 2 freed ones kept for the next: reading
    # all 21 lets the first go and its memory decode later ones
    try:
        first = sources.reader(_node(tree, "part00.bin").data)
        assert first(0, 900_000) == members["part00.bin"]
        for name, data in members.items():
            assert sources.reader(_node(tree, name).data)(0, len(data)) == data
        gc.collect()
        assert first(0, 900_000) == members["part00.bin"]
        assert first(123_456, 5) == members["part00.bin"][123_456:123_461]
    finally:
        sources.close()
        conn.close()


def test_the_first_byte_of_a_large_member_decodes_and_hashes_64_kib_of_it_not_its_whole_first_piece(tmp_path, vault):
    """A member 1.5 MiB into an 8 MiB frame (pzstd's usual): its first byte waits for the frame decoded to the
    member's start plus one 64 KiB part, hashed alone against the catalog's part hash (not to its start plus the
    1 MiB of its first piece, hashed whole); the next part decodes no further than it needs and one step more; a
    read at 1 MiB + 5 checks the second piece whole, and `cat`'s first read (256 KiB, a stream's) the first piece
    whole. The bytes are tarfile's."""
    import os

    from cloudvault.mount import frames
    from cloudvault.pieces import ONE_PASS, PART, PIECE

    if not ONE_PASS:
        pytest.skip("parts are recorded with one-pass piece hashes (the extension, AVX2 or wider)")
    members = {"pad.bin": os.urandom(3 << 19), "big.bin": os.urandom(3 << 20)}
    db = _pzstd_catalog(tmp_path, vault, members, step=8 << 20)
    conn, tree, sources = _sources(db, 64 << 20)
    try:
        node = _node(tree, "big.bin")
        read = sources.reader(node.data)
        assert read(0, 1) == members["big.bin"][:1]
        decoded = sum(frame._done for frame in sources.cache._frames.values())
        assert decoded <= node.data.data_offset + 2 * PART, decoded - node.data.data_offset
        assert sources.pieces.used == PART  # what was hashed and kept: one part
        assert read(PART + 5, 10) == members["big.bin"][PART + 5 : PART + 15]  # the next part: decoded no further
        decoded = sum(frame._done for frame in sources.cache._frames.values())  # than it needs and one step more
        assert decoded <= node.data.data_offset + 2 * PART + frames.DECODE_STEP <= node.data.data_offset + 4 * PART
        assert read(PIECE + 5, 10) == members["big.bin"][PIECE + 5 : PIECE + 15]
        assert sources.pieces.used == 2 * PART + PIECE
        assert read(0, 1 << 18) == members["big.bin"][: 1 << 18]  # `cat`'s first read: a stream's, by piece
        assert sources.pieces.used == 2 * PART + 2 * PIECE
        assert read(0, 3 << 20) == members["big.bin"]
    finally:
        sources.close()
        conn.close()


def test_a_streams_read_has_its_frame_decoded_on_ahead_while_a_small_first_read_does_not(tmp_path, vault):
    """`cat` reads 256 KiB at a time: after each such read the decode-ahead thread decodes the member's frame on, to
    the member's end or READ_AHEAD past the read at most, while the read's parts are hashed and handed out. `head -c
    1` (a read of 16 KiB) has nothing decoded ahead of it; nothing is decoded ahead past the member's end."""
    import os

    from cloudvault.mount import frames
    from cloudvault.pieces import PIECE

    members = {"pad.bin": os.urandom(3 << 19), "big.bin": os.urandom(3 << 20), "after.bin": os.urandom(3 << 20)}
    db = _pzstd_catalog(tmp_path, vault, members, step=16 << 20)
    conn, tree, sources = _sources(db, 64 << 20)

    def decoded_after_the_ahead_thread() -> int:
        sources._ahead.submit(lambda: None).result()
        return sum(frame._done for frame in sources.cache._frames.values()) - node.data.data_offset

    try:
        node = _node(tree, "big.bin")
        read = sources.reader(node.data)
        assert read(0, 16 << 10) == members["big.bin"][: 16 << 10]
        assert decoded_after_the_ahead_thread() <= 2 * frames.DECODE_STEP
        assert read(0, 1 << 18) == members["big.bin"][: 1 << 18]
        assert (1 << 18) + frames.READ_AHEAD <= decoded_after_the_ahead_thread() <= (1 << 18) + frames.READ_AHEAD + (
            frames.DECODE_STEP)  # fmt: skip
        assert read(3 * PIECE - (1 << 18), 1 << 18) == members["big.bin"][-(1 << 18) :]
        assert decoded_after_the_ahead_thread() <= 3 * PIECE + frames.DECODE_STEP
        assert read(0, 3 * PIECE) == members["big.bin"]
    finally:
        sources.close()
        conn.close()


def test_a_read_hands_fuse_the_verified_bytes_without_copying_them_on_the_python_heap(tmp_path, vault):
    """VaultFS.read_into writes a read straight into libfuse's buffer from the memory its piece was decoded into
    and checked in: no piece-sized or read-sized bytes object is made (tracemalloc's peak stays small), and the
    bytes are tarfile's."""
    import ctypes
    import os
    import tracemalloc

    from cloudvault.mount.fs import VaultFS

    data = os.urandom(1 << 20) * 3  # three pieces
    db = _pzstd_catalog(tmp_path, vault, {"big.bin": data})
    conn, tree, sources = _sources(db, 64 << 20)
    vfs = VaultFS(tree, sources)
    try:
        (path,) = [p for p in tree.nodes if p.endswith("/reads.tar.zst")]
        fh = vfs.open(f"{path}/big.bin", os.O_RDONLY)
        buf = ctypes.create_string_buffer(1 << 17)
        address = ctypes.addressof(buf)
        vfs.read_into(None, address, 1 << 17, 0, fh)  # the first read: the archive opened, its first frame begun
        tracemalloc.start()
        try:
            got = []
            for offset in range(0, len(data), 1 << 17):
                n = vfs.read_into(None, address, 1 << 17, offset, fh)
                got.append(buf.raw[:n])
            peak = tracemalloc.get_traced_memory()[1] - sum(len(g) + 64 for g in got)
        finally:
            tracemalloc.stop()
        assert b"".join(got) == data
        assert peak < 64 << 10, f"{peak} bytes allocated beyond what the test kept"
        vfs.release(None, fh)
    finally:
        sources.close()
        conn.close()


@pytest.mark.fuse
def test_a_listed_folders_entries_come_with_their_attributes_so_opening_each_asks_the_mount_no_lookup(
    tmp_path,
    vault,
    fuse,  # noqa: F811
):
    """A listing answers READDIRPLUS with each entry's attributes, as often as the kernel asks: `grep -r` (read
    the folder, then open and read each file) costs the mount no LOOKUP per file, and the bytes and sizes are
    tarfile's."""
    import json
    import os
    import subprocess
    import sys
    import time

    from cloudvault.mount.session import mounted

    members = {f"logs/run_{i:04d}.log": f"step {i} loss {i / 7:.4f}\n".encode() * (1 + i % 50) for i in range(600)}
    db = _pzstd_catalog(tmp_path, vault, members)
    point, log = tmp_path / "point", tmp_path / "fuse.log"
    point.mkdir()
    options = {"catalog": str(db), "mountpoint": str(point), "debug": True}
    with open(log, "wb") as err:
        serving = subprocess.Popen([sys.executable, "-P", "-m", "cloudvault.mount.serve", json.dumps(options)],
                                   stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
    try:
        folder = point / "mirror" / "018_reads" / "reads.tar.zst" / "logs"
        for _ in range(500):
            if mounted(point) and folder.exists():
                break
            time.sleep(0.02)
        names = sorted(os.listdir(folder))
        assert len(names) == len(members)
        before = log.read_text(errors="replace").count("LOOKUP")
        for name in names:
            path = folder / name
            assert os.stat(path).st_size == len(members[f"logs/{name}"])
            assert path.read_bytes() == members[f"logs/{name}"]
        lookups = log.read_text(errors="replace").count("LOOKUP") - before
        assert lookups == 0, f"{lookups} lookups for {len(names)} files already listed"
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(point)], check=False)
        serving.wait(timeout=30)


def test_the_mount_uses_zstd_once_before_it_serves_so_the_first_read_does_not_pay_for_that(demo_catalog, monkeypatch):
    """serve_catalog decodes a frame of its own before the first FUSE request: zstd's first use in a process
    (its decoder's set-up and first buffers, ~0.8 ms here) is not on the first member's read."""
    from cloudvault.mount import frames
    from cloudvault.mount import serve as serving
    from cloudvault.mount.session import MountOptions

    seen = []
    monkeypatch.setattr(serving, "serve", lambda *a, **k: seen.append(frames.decoder_warmed()))
    serving.serve_catalog(MountOptions(catalog=str(demo_catalog), mountpoint=Path("/nonexistent")))
    assert seen == [True]


def test_a_frame_is_decoded_by_a_decoder_the_mount_warmed_not_by_a_new_one_each_frame(tmp_path, vault, monkeypatch):
    """A new zstd decoder's first frame costs ~1 ms more than its next (its window buffer faulted in page by page):
    the mount warms KEPT_DECODERS decoders on a frame of its own before serving, and each frame is decoded by a kept
    one, which it holds while it is decoded in part (a member's first byte) and hands back once whole or let go. So
    the first bytes of members in two frames (`head -c 1` of one, then of another), and then whole members, are
    read with no new decoder made."""
    import os

    import zstandard

    from cloudvault.mount import frames

    members = {"a.bin": os.urandom(1 << 20), "b.bin": os.urandom(7 << 20), "c.bin": os.urandom(1 << 20)}
    db = _pzstd_catalog(tmp_path, vault, members, step=4 << 20)  # a in frame 0, c in frame 2, each in its first half
    made, decoder = [], zstandard.ZstdDecompressor

    def counted(*args, **kwargs):
        made.append(1)
        return decoder(*args, **kwargs)

    monkeypatch.setattr(frames.zstandard, "ZstdDecompressor", counted)
    monkeypatch.setattr(frames, "DECODERS", frames.Decoders(frames.KEPT_DECODERS))
    frames.warm_decoder(1 << 20)
    assert len(made) == frames.KEPT_DECODERS >= 2
    conn, tree, sources = _sources(db, 64 << 20)
    try:
        for name in ("a.bin", "c.bin"):
            assert sources.reader(_node(tree, name).data)(0, 1) == members[name][:1]
        assert len(made) == frames.KEPT_DECODERS, "a frame's first read made a decoder of its own"
        for name in ("a.bin", "c.bin"):
            assert sources.reader(_node(tree, name).data)(0, 1 << 20) == members[name]
    finally:
        sources.close()
        conn.close()


def test_a_decoder_that_met_a_damaged_frame_is_not_kept_for_the_next_one(monkeypatch):
    """A damaged frame is EIO for its readers; the decoder that failed on it is let go with the frame, not handed
    to the next frame in whatever state zstd left it."""
    import gc

    import zstandard

    from cloudvault.errors import IntegrityError
    from cloudvault.mount import frames

    monkeypatch.setattr(frames, "DECODERS", frames.Decoders(frames.KEPT_DECODERS))
    good = zstandard.ZstdCompressor(write_checksum=True).compress(bytes(range(256)) * 4096)
    damaged = good[:-4] + bytes(4)  # its content checksum wrong
    frame = frames.DecodedFrame(damaged, 1 << 20, frames.FrameBuffers(0))
    with pytest.raises(IntegrityError):
        frame.view(0, 1 << 20)
    del frame
    gc.collect()
    assert frames.DECODERS._free == []
    frame = frames.DecodedFrame(good, 1 << 20, frames.FrameBuffers(0))
    assert frame.slice(0, 1 << 20) == bytes(range(256)) * 4096
    assert len(frames.DECODERS._free) == 1  # whole: handed back


def test_the_warmed_decoders_window_buffer_holds_the_window_of_pzstds_frames_at_its_usual_levels(tmp_path):
    """A kept decoder reuses its window buffer only for a frame whose window fits it: the frame the mount warms its
    decoder on has a window of USUAL_FRAME (8 MiB: pzstd's frames at -3 have 2 MiB, at -19 8 MiB), so a member's
    first frame decodes into memory already faulted in."""
    import subprocess

    import zstandard

    from cloudvault.mount import frames

    assert zstandard.get_frame_parameters(frames.warm_frame(frames.USUAL_FRAME)).window_size >= frames.USUAL_FRAME
    raw = tmp_path / "raw"
    raw.write_bytes(bytes(range(256)) * (1 << 15))
    for level in ("-3", "-19"):
        subprocess.run(["pzstd", "-q", "-f", level, str(raw), "-o", str(tmp_path / "p.zst")], check=True)
        head = (tmp_path / "p.zst").read_bytes()[:32]
        assert zstandard.get_frame_parameters(head).window_size <= frames.USUAL_FRAME


@pytest.mark.fuse
def test_a_libfuse_thread_keeps_its_python_thread_state_from_one_callback_to_the_next(
    tmp_path,
    vault,
    fuse,  # noqa: F811
):
    """Python makes a thread state for a callback on a thread it did not start and drops it after (with a 16 KiB
    frame stack mapped and unmapped each time, three times per file `grep -r` reads): the mount's FUSE keeps
    each libfuse thread's, so what one callback left in a threading.local is there for that thread's next."""
    import os
    import subprocess
    import threading
    import time

    import mfusepy

    from cloudvault.mount.fs import MAX_THREADS, VaultFS, fuse_binding, make_operations
    from cloudvault.mount.session import mounted

    members = {f"logs/run_{i:03d}.log": b"step %d\n" % i * (1 + i) for i in range(200)}
    db = _pzstd_catalog(tmp_path, vault, members)
    conn, tree, sources = _sources(db, 64 << 20)
    vfs = VaultFS(tree, sources)
    local, calls, forgotten = threading.local(), [], []
    seen: set[int] = set()
    getattr_of = vfs.getattr

    def getattr_remembering(path, fh=None):
        me = threading.get_native_id()
        calls.append(me)
        if me in seen and not getattr(local, "here", False):
            forgotten.append(me)
        seen.add(me)
        local.here = True
        return getattr_of(path, fh)

    vfs.getattr = getattr_remembering
    point = tmp_path / "point"
    point.mkdir()
    serving = threading.Thread(target=fuse_binding(mfusepy), daemon=True,
                               args=(make_operations(vfs), str(point)),
                               kwargs={"foreground": True, "ro": True, "max_threads": MAX_THREADS})  # fmt: skip
    serving.start()
    try:
        for _ in range(500):
            if mounted(point) and (point / "mirror").exists():
                break
            time.sleep(0.02)
        for name in members:  # not listed first: each stat is a LOOKUP, a getattr callback
            os.stat(point / "mirror" / "018_reads" / "reads.tar.zst" / name)
        assert len(calls) > 2 * len(set(calls)), "too few callbacks per thread to tell"
        assert forgotten == [], f"{len(forgotten)} of {len(calls)} callbacks found a fresh thread state"
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(point)], check=False)
        serving.join(timeout=30)
        sources.close()
        conn.close()


def test_members_of_frames_too_large_to_cache_are_read_forward_byte_for_byte_as_tarfile_wrote_them(tmp_path, vault):
    """A frame over half the cache is never cached: its members' reads, whole and in ranges that cross frames, go
    through the forward reader (ArchiveBytes.read), every byte still from a piece that verified."""
    import os

    members = {f"part{i}.bin": os.urandom(700_000) * 3 for i in range(4)}  # 2.1 MB each, frames of 4 MiB
    db = _pzstd_catalog(tmp_path, vault, members, step=4 << 20)
    conn, tree, sources = _sources(db, 6 << 20)  # fits: frames of at most 3 MiB, less the kept buffers
    try:
        for name, data in members.items():
            read = sources.reader(_node(tree, name).data)
            assert read(0, len(data)) == data
            for at, n in ((0, 1), (70_000, 200_000), (1 << 20, 1 << 20), (len(data) - 5, 5)):
                assert read(at, n) == data[at : at + n], (name, at)
        assert sources.cache.used < 1 << 20, "a frame too large to cache was cached"  # the tar's short last one is
    finally:
        conn.close()
