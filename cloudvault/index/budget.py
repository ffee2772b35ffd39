"""How much of the machine `vault index` uses: its cores (`--workers`, by default every core present, fewer if
memory is short), shared between worker processes (one archive each at a time) and, within an archive, the
threads that decode its frames and hash its bytes; and the memory each worker may hold for that.

`--workers N` is a budget of N cores. With at least N archives left, N processes each decode one archive with
one decoding thread; with fewer, each archive started gets the cores the others leave (N // archives left), so
one big multi-frame archive is decoded on all N cores and the last archives of a run do not end on one core.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cloudvault.archive.zstdframes import FRAME_IN_MEMORY, PIECE, RING

MiB = 1 << 20
WORKER_BASE = 64 * MiB  # a worker's interpreter, its shard's SQLite cache, tar and hashing state
WINDOW = 8 * MiB  # a zstd frame's window at the levels backups use (pzstd -3 frames: 8 MiB)
PER_DECODER = RING * PIECE + FRAME_IN_MEMORY + WINDOW  # its ring of decoded pieces, a held frame, zstd's window
MEMORY_SHARE = 0.75  # of the memory available when the run starts: the page cache keeps the rest


def cores_present() -> int:
    """The cores this process may run on (a Slurm allocation or taskset narrows them), else the CPU count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def memory_available() -> int | None:
    """Bytes of memory available now (Linux MemAvailable); None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def worker_memory(decoders: int) -> int:
    """The most one worker holds while decoding an archive with this many decoding threads."""
    return WORKER_BASE + max(1, decoders) * PER_DECODER


@dataclass(frozen=True)
class Budget:
    """The cores and memory of one `vault index` run."""

    cores: int  # cores to use: --workers, or the cores present bounded by memory
    cores_present: int
    memory: int | None  # bytes available when planned (None: unknown)
    bounded_by_memory: bool  # fewer cores than present because memory would not hold a worker per core

    def processes(self, archives: int) -> int:
        """Worker processes for this many archives: one per core, never more than there are archives."""
        return max(1, min(self.cores, archives))

    def decoders(self, archives_left: int) -> int:
        """Decoding threads for an archive started when archives_left (itself included) are not finished."""
        return max(1, self.cores // max(1, min(self.cores, archives_left)))

    def worker_memory(self, archives_left: int) -> int:
        return worker_memory(self.decoders(archives_left))

    def to_json(self) -> dict:
        """`vault index --dry-run --json`: the run's budget with one archive per core."""
        return self.as_dict(self.cores)

    def as_dict(self, archives: int) -> dict:
        return {"cores": self.cores, "cores_present": self.cores_present, "memory_available": self.memory,
                "bounded_by_memory": self.bounded_by_memory, "archives": archives,
                "processes": self.processes(archives), "decoders_per_archive": self.decoders(archives),
                "worker_memory": self.worker_memory(archives), "decoders_for_one_archive": self.decoders(1),
                "worker_memory_for_one_archive": self.worker_memory(1)}  # fmt: skip


def plan_budget(workers: int | None, present: int | None = None, memory: int | None = None) -> Budget:
    """The run's budget: `workers` cores as asked, or by default every core present as long as memory holds a
    worker of one decoder per core (each worker's memory: `worker_memory`)."""
    present = present or cores_present()
    memory = memory if memory is not None else memory_available()
    if workers is not None:
        return Budget(workers, present, memory, False)
    cores = present
    if memory is not None:
        cores = max(1, min(present, int(memory * MEMORY_SHARE) // worker_memory(1)))
    return Budget(cores, present, memory, cores < present)
