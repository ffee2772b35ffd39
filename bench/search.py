"""Search speed: whole `vault search` processes over a catalog of 1M archive members vs `grep -i` over the
same paths as `.tar.zst.list` text. Prints medians and ratios; run in one go: `python bench/search.py`."""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cloudvault.catalog.db import open_catalog, transaction

N_MEMBERS = int(os.environ.get("BENCH_MEMBERS", 1_000_000))
PER_ARCHIVE = 25_000
QUERIES = ["670bf1c4", "b16r64_c32k", "granite", "run10/accept", "scores"]
RUNS = 15


def member_paths(rng: random.Random, n: int):
    kinds = ["accept", "score", "block", "metadata", "phase", "compaction", "judge"]
    for i in range(n):
        kind = rng.choice(kinds)
        run = f"run{rng.randint(1, 40)}"
        doc = f"{rng.getrandbits(32):08x}"
        arm = rng.choice(["gra_van_b8r32", "mag_ss_b16r64_c32k", "qwen_ss_b4r16", "neo_b1"])
        yield f"dumps/{arm}/{run}/{kind}/{doc}_{i}.json"


def build(work: Path) -> tuple[Path, Path]:
    db = work / "catalog.db"
    listing = work / "all.tar.zst.list"
    conn = open_catalog(db, create=True)
    rng = random.Random(1)
    started = time.monotonic()
    with transaction(conn), open(listing, "w") as lst:
        mirror = conn.execute("INSERT INTO mirrors(name, root) VALUES ('bench', '/bench') RETURNING id").fetchone()[0]
        conn.execute("INSERT INTO entries(mirror_id, entry_id, what) VALUES (?, '018_bench', 'bench')", (mirror,))
        archive_id = None
        for i, path in enumerate(member_paths(rng, N_MEMBERS)):
            if i % PER_ARCHIVE == 0:
                fid = conn.execute(
                    "INSERT INTO files(mirror_id, entry_id, path, kind, size, mtime_ns, ctime_ns, inode, mode) "
                    "VALUES (?, '018_bench', ?, 'file', 1, 1, 1, ?, 420) RETURNING id",
                    (mirror, f"018_bench/data/part{i // PER_ARCHIVE:03d}.tar.zst", i),
                ).fetchone()[0]
                archive_id = conn.execute(
                    "INSERT INTO archives(file_id, status, raw_size, member_count, frame_count) "
                    "VALUES (?, 'ok', 0, ?, 1) RETURNING id",
                    (fid, PER_ARCHIVE),
                ).fetchone()[0]
            conn.execute(
                "INSERT INTO members(archive_id, path, type, size, mode, mtime, uid, gid, uname, gname, "
                "header_offset, data_offset, blake3) VALUES (?, ?, 'file', 100, 420, 0, 0, 0, '', '', 0, 512, NULL)",
                (archive_id, path),
            )
            lst.write(f"./{path}\n")
        # `vault index` writes members' search rows after an archive's rows (catalog/files.py): here, once at the end
        conn.execute("INSERT INTO members_fts(members_fts) VALUES ('rebuild')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    print(
        f"built {N_MEMBERS:,} members in {time.monotonic() - started:.0f} s; "
        f"catalog {db.stat().st_size / 2**20:.0f} MiB, listing {listing.stat().st_size / 2**20:.0f} MiB"
    )
    return db, listing


def median_ms(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    times, last = [], None
    for _ in range(RUNS):
        t = time.perf_counter()
        last = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000, last


def main() -> None:
    vault = shutil.which("vault") or sys.exit("install cloudvault first: pip install -e .")
    work = Path(tempfile.mkdtemp(prefix="vault-bench-search-"))
    try:
        db, listing = build(work)
        print(f"{'query':<16}{'vault ms':>10}{'grep ms':>10}{'grep/vault':>12}{'hits':>9}{'grep lines':>12}")
        for q in QUERIES:
            v_ms, v = median_ms([vault, "--catalog", str(db), "search", q, "--kind", "member", "--limit", "20"])
            g_ms, g = median_ms(["grep", "-i", q, str(listing)])
            full = subprocess.run(
                [vault, "--catalog", str(db), "search", q, "--kind", "member", "--limit", "0", "--json"],
                capture_output=True,
                text=True,
            )
            import json

            hits = len(json.loads(full.stdout)["results"]) if full.stdout.strip() else 0
            lines = len(g.stdout.splitlines())
            ok = "ok" if hits == lines else "MISMATCH"
            print(f"{q:<16}{v_ms:>10.1f}{g_ms:>10.1f}{g_ms / v_ms:>12.2f}{hits:>9}{lines:>12}  {ok}")
        h_ms, _ = median_ms([vault, "--help"])
        bare_ms, _ = median_ms([sys.executable, "-c", "pass"])
        print(f"vault --help (Typer path): {h_ms:.1f} ms; python -c pass: {bare_ms:.1f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
