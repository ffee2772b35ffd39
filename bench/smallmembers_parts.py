"""Where the time of `vault index` of many small members goes, per member: each part timed where it runs (its
thread's CPU for the scan's parts, wall for the commit's), in one in-process index of the BENCH_SMALL (default
200000) small-member archive bench/smallmembers.py builds: `python bench/smallmembers_parts.py` with the vault to
measure installed (its cloudvault is the one imported). Issue 38 asks 0.5x `zstd -dc`: about 2.4 us a member in all.

Last, a lower bound: the least wall time any design could take that stores what vault's catalog stores (each
member's row, hash and path search row, after the secret prefilter saw its bytes), from the parts that work needs
(REQUIRED), each as measured here: spread over the cores with nothing else paid (no glue, no waiting), but the
catalog's writes one after another (one SQLite connection writes them), plus the interpreter's start (START_FLOOR).
The decode's share is its thread's CPU, streamed into one buffer. What that bound allows, as a speed against
`zstd -dc`, is the most any vault could reach on this machine. Beside it, the scan alone (scan_alone: the same
scan with its records thrown away) and the catalog's writes alone, each as a speed against `zstd -dc`.
"""

from __future__ import annotations

import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("BENCH_SMALL", "200000")
sys.path.insert(0, str(Path(__file__).parent))
import index as makers  # noqa: E402 (bench/index.py: the same archives its table reads)
import smallmembers as whole  # noqa: E402 (bench/smallmembers.py: its whole-process timer)

from cloudvault.archive import plainruns  # noqa: E402
from cloudvault.archive import scan as archive_scan  # noqa: E402
from cloudvault.archive.scan import MemberRecord  # noqa: E402
from cloudvault.catalog import files as catalog_files  # noqa: E402
from cloudvault.catalog import shards  # noqa: E402
from cloudvault.cli.main import main  # noqa: E402
from cloudvault.index import archives, secrets  # noqa: E402

T: dict[str, float] = {}
SCAN = ("scan: tar headers (native walk)", "scan: BLAKE3 (one call a run)", "scan: secret prefilter")
SERIAL = ("commit: catalog rows", "commit: search rows (FTS5)", "commit: the rest (file, archive rows, COMMIT)")
REQUIRED = ("decode", *SCAN, *SERIAL)
START_FLOOR = [sys.executable, "-c", "import sqlite3, zstandard, blake3"]  # bench/startup.py's floor


def lower_bound(parts: dict[str, float], cores: int, start: float) -> float:
    """The least wall seconds for the REQUIRED parts (KeyError if one was not measured): shared over cores, or the
    catalog's writes one after another where those take longer, plus start."""
    required = sum(parts[name] for name in REQUIRED)
    return max(required / cores, sum(parts[name] for name in SERIAL)) + start


def decode_cpu(archive: Path) -> float:
    """This thread's CPU seconds to decode archive (file reads included) into one reused 1 MiB buffer."""
    import zstandard

    buffer = memoryview(bytearray(1 << 20))
    started = time.thread_time()
    with open(archive, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as reader:
        while reader.readinto(buffer):
            pass
    return time.thread_time() - started


def scanned(archive: Path) -> Iterator[MemberRecord]:
    """The member records of vault's scan of archive as `vault index` runs it on a local mirror (decode on two
    cores, tar headers, BLAKE3, the secret checks of names and bytes), as they come: no catalog, shard or commit."""
    rules = secrets.SecretRules(secrets.DEFAULT_RULES)
    with archives._fewer_collections(), open(archive, "rb") as fh:
        scan = archive_scan.ArchiveScan(fh, inspect=rules.scanner, prefilter=rules.may_match, decoders=2,
                                        opener=functools.partial(open, archive, "rb"))  # fmt: skip
        yield from archives.redacted(iter(scan), rules, scan.result)


def scan_alone(archive: Path) -> tuple[int, float]:
    """(members, wall seconds) of the scan (scanned) with its records thrown away, to set beside the catalog's
    writes alone (SERIAL)."""
    started = time.perf_counter()
    members = sum(1 for _ in scanned(archive))
    return members, time.perf_counter() - started


def median_wall(cmd: list[str], runs: int = 5) -> float:
    """The median wall seconds of a whole process, over runs (bench/smallmembers.py's timer)."""
    return statistics.median(whole.timed(cmd)[0] for _ in range(runs))


def timed(name, f, clock=time.thread_time):
    def run(*a, **k):
        started = clock()
        try:
            return f(*a, **k)
        finally:
            T[name] = T.get(name, 0) + clock() - started

    return run


def instrument() -> None:
    if plainruns._plainruns is not None:
        walker = timed("scan: tar headers (native walk)", plainruns._plainruns.plain_headers)
        plainruns._plainruns = type("Walker", (), {"plain_headers": staticmethod(walker)})
    archive_scan.member_hex_digests = timed("scan: BLAKE3 (one call a run)", archive_scan.member_hex_digests)
    secrets.LiteralSearch.__call__ = timed("scan: secret prefilter", secrets.LiteralSearch.__call__)
    shards.add_member_batch = timed("shard rows (the writing thread's CPU)", shards.add_member_batch)
    scan_to_shard = archives.scan_to_shard

    def scan(*a, **k):
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return scan_to_shard(*a, **k)
        finally:
            T["scan: main thread CPU, all"] = time.thread_time() - cpu
            T["scan: wall"] = time.perf_counter() - wall

    archives.scan_to_shard = scan
    catalog_files.build_member_search = timed("commit: search rows (FTS5)", catalog_files.build_member_search,
                                              time.perf_counter)  # fmt: skip
    catalog_files.insert_members = timed("commit: catalog and search rows", catalog_files.insert_members,
                                         time.perf_counter)  # fmt: skip
    archives.commit_archive = timed("commit: all", archives.commit_archive, time.perf_counter)


def small_mirror(work: Path) -> Path:
    """The small-member archive, as bench/smallmembers.py builds it, alone in work/mirror/018_bench: its path."""
    small = work / "small.tar"
    makers.small_tar(small)
    entry = work / "mirror/018_bench"
    entry.mkdir(parents=True)
    subprocess.run(["zstd", "-q", "-T0", "-3", str(small), "-o", str(entry / "small.tar.zst")], check=True)
    small.unlink()
    return entry / "small.tar.zst"


def main_() -> None:
    work = Path(tempfile.mkdtemp(prefix="vault-bench-parts-"))
    try:
        archive = small_mirror(work)
        zstd = median_wall(["zstd", "-q", "-d", "-c", "-o", "/dev/null", str(archive)])
        T["decode"] = min(decode_cpu(archive) for _ in range(5))
        alone = statistics.median(scan_alone(archive)[1] for _ in range(5))
        start = median_wall(START_FLOOR)
        instrument()
        started = time.perf_counter()
        main(["--catalog", str(work / "c.db"), "index", "-q", str(work / "mirror")])
        T["index: wall (in process, no start-up)"] = time.perf_counter() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = makers.SMALL
    T["scan: the rest of the main thread"] = T["scan: main thread CPU, all"] - sum(T.get(k, 0) for k in SCAN)
    T["commit: catalog rows"] = T["commit: catalog and search rows"] - T["commit: search rows (FTS5)"]
    T["commit: the rest (file, archive rows, COMMIT)"] = T["commit: all"] - T["commit: catalog and search rows"]
    print(f"{n} small members; zstd -dc {zstd:.2f} s ({zstd / n * 1e6:.2f} us a member); load "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip
    for name in sorted(T):
        if name != "commit: catalog and search rows":
            print(f"  {name:48s} {T[name]:6.3f} s {T[name] / n * 1e6:6.2f} us a member")
    serial = sum(T[k] for k in SERIAL)
    print(f"the scan alone (no catalog, shard or commit; wall, median of 5): {alone:.3f} s, {zstd / alone:.2f}x "
          f"zstd -dc; the catalog's writes alone: {serial:.3f} s, {zstd / serial:.2f}x")  # fmt: skip
    cores = os.cpu_count() or 1
    bound = lower_bound(T, cores, start)
    print(f"lower bound on {cores} cores: the required parts {sum(T[k] for k in REQUIRED):.3f} s of CPU (decode "
          f"alone: {T['decode']:.3f} s), the catalog's writes {sum(T[k] for k in SERIAL):.3f} s of them on one "
          f"thread, start {start:.3f} s: {bound:.3f} s, at most {zstd / bound:.2f}x zstd -dc")  # fmt: skip


if __name__ == "__main__":
    main_()
