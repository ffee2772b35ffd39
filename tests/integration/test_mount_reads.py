"""The mount's read path costs what the bytes cost: decoded frames in private memory (no shared-memory page
faults), verified pieces handed to FUSE straight from where they were decoded and checked, and listings that
carry each entry's attributes so the lookups after them never reach the mount process."""

from __future__ import annotations

from pathlib import Path


def _rss_shmem_kib() -> int:
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("RssShmem"))


def test_decoded_frames_are_private_memory_not_shared_memory():
    """A frame's buffer is a private anonymous mapping: its pages fault in as plain anonymous memory (eligible
    for huge pages), never as shmem, which costs about twice as much per page to fault in."""
    from cloudvault.mount.frames import FrameBuffers

    before = _rss_shmem_kib()
    buffer = FrameBuffers(0).take(8 << 20)
    for at in range(0, len(buffer), 4096):
        buffer[at] = 1
    assert _rss_shmem_kib() - before < 1024, "the frame's pages are shared memory"
