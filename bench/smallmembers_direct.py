"""A prototype, measured and not built into vault: the small members' rows written straight into the catalog while
the archive is scanned (a thread of their own, no shard, no copy at the commit), against `vault index` as it is,
both in-process (no start-up), taking turns: `python bench/smallmembers_direct.py` with the vault to measure
installed.

The prototype writes only the members' rows and their search rows (after the scan, or a batch at a time during it:
both are timed), then commits: no file or archive row, no flags, no damage handling, no seekable copy. It does less
than `vault index`, so its time is the most that design could gain, not what it would. docs/performance.md has the
figures (issue 38).
"""

from __future__ import annotations

import itertools
import os
import queue
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("BENCH_SMALL", "200000")
sys.path.insert(0, str(Path(__file__).parent))
import index as makers  # noqa: E402 (bench/index.py: the same archives its table reads)
import smallmembers_parts as parts  # noqa: E402 (its scan: vault's, records as they come)

from cloudvault.catalog import shards  # noqa: E402
from cloudvault.cli.main import main  # noqa: E402

TURNS = int(os.environ.get("BENCH_TURNS", "5"))
ARCHIVE_ID = 0  # no archive row: the prototype's connection leaves foreign keys off
ROW = f"({ARCHIVE_ID},?,NULL,?,?,?,?,?,?,?,?,NULL,?,?,?,NULL,NULL,NULL)"  # a plain member (shards.PLAIN_FIELDS)
ANY_ROW = f"INSERT INTO members(archive_id, {shards.MEMBER_COLUMNS}) VALUES ({ARCHIVE_ID},{','.join('?' * 17)})"
SEARCH_ROWS = "INSERT INTO members_fts(rowid, path) SELECT id, path FROM members WHERE id > ? ORDER BY id"


def _write(conn: sqlite3.Connection, batch: list[tuple]) -> None:
    """A batch into the catalog's members: plain ones as INSERTs of many rows (as shards.add_member_batch)."""
    if not all(map(shards.NONE_RARE.__eq__, map(shards.RARE_FIELDS, batch))):
        conn.executemany(ANY_ROW, batch)
        return
    for at in range(0, len(batch), shards.ROWS_PER_INSERT):
        part = batch[at : at + shards.ROWS_PER_INSERT]
        conn.execute(f"INSERT INTO members(archive_id, {shards.MEMBER_COLUMNS}) VALUES " + ",".join([ROW] * len(part)),
                     list(itertools.chain.from_iterable(map(shards.PLAIN_FIELDS, part))))  # fmt: skip


def direct_index(archive: Path, catalog: Path, *, search_during: bool) -> int:
    """archive's members scanned into the catalog (made by `vault index`) in one transaction, on a writer thread
    fed batches of shards.SHARD_BATCH through a queue of shards.QUEUED_BATCHES; search_during: each batch's search
    rows right after it (else all of them after the scan). How many members it wrote."""
    conn = sqlite3.connect(catalog, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA cache_size = -32768")  # catalog.db.BULK_CACHE_KIB, as `vault index` sets it
    conn.execute("BEGIN IMMEDIATE")
    after = conn.execute("SELECT coalesce(max(id), 0) FROM members").fetchone()[0]
    batches: queue.Queue = queue.Queue(shards.QUEUED_BATCHES)
    errors: list[BaseException] = []

    def writer() -> None:
        last = after
        while (batch := batches.get()) is not None:
            if errors:
                continue
            try:
                _write(conn, batch)
                if search_during:
                    conn.execute(SEARCH_ROWS, (last,))
                    last = conn.execute("SELECT max(id) FROM members").fetchone()[0]
            except BaseException as exc:  # noqa: BLE001 (raised again below)
                errors.append(exc)

    thread = threading.Thread(target=writer, name="direct-rows")
    thread.start()
    try:
        records = parts.scanned(archive)
        while batch := list(itertools.islice(records, shards.SHARD_BATCH)):
            batches.put(batch)
    finally:
        batches.put(None)
        thread.join()
    try:
        if errors:
            raise errors[0]
        if not search_during:
            conn.execute(SEARCH_ROWS, (after,))
        conn.execute("COMMIT")
        return conn.execute("SELECT count(*) FROM members WHERE id > ?", (after,)).fetchone()[0]
    finally:
        conn.close()


def main_() -> None:
    work = Path(tempfile.mkdtemp(prefix="vault-bench-direct-"))
    try:
        archive = parts.small_mirror(work)
        (work / "empty/018_bench").mkdir(parents=True)
        empty = work / "empty.db"
        main(["--catalog", str(empty), "index", "-q", str(work / "empty")])

        def fresh() -> Path:
            for old in work.glob("turn.db*"):
                old.unlink()
            shutil.copy(empty, work / "turn.db")
            return work / "turn.db"

        runs = {
            "vault index (shard, then copied at the commit)":
                lambda: main(["--catalog", str(fresh()), "index", "-q", str(work / "mirror")]),
            "prototype, search rows after the scan": lambda: direct_index(archive, fresh(), search_during=False),
            "prototype, search rows during the scan": lambda: direct_index(archive, fresh(), search_during=True),
        }  # fmt: skip
        found: dict[str, list[float]] = {"zstd -dc (whole process)": [], **{name: [] for name in runs}}
        names = list(runs)
        for turn in range(TURNS):
            found["zstd -dc (whole process)"].append(parts.median_wall(
                ["zstd", "-q", "-d", "-c", "-o", "/dev/null", str(archive)], runs=1))  # fmt: skip
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                started = time.perf_counter()
                runs[name]()
                found[name].append(time.perf_counter() - started)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    zstd = statistics.median(found["zstd -dc (whole process)"])
    print(f"{makers.SMALL} small members, {TURNS} turns, medians; load {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores (in-process, no start-up, but zstd)")  # fmt: skip
    for name, secs in found.items():
        print(f"  {name:50s} {statistics.median(secs):6.3f} s  {zstd / statistics.median(secs):5.2f}x zstd -dc")


if __name__ == "__main__":
    main_()
