"""Extract and index speed against the tools the lab uses today, in one run: `python bench/extract.py`.

Builds a realistic archive (small logs and large dumps, like 018) of BENCH_GB (default 1.2) GB raw, as a
single-frame `zstd -T0` archive and a multi-frame `pzstd` one, indexes both, and prints whole-process times of
`vault extract`, `tar -I zstd -xf`, ratarmount (mount + cp) and the `zstd -dc | head -c` floor for members near
the start, middle and end; then `vault index` against `zstd -dc > /dev/null` and ratarmount's index, with peak RSS.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAW_GB = float(os.environ.get("BENCH_GB", "1.2"))
LOW_ENTROPY = bytes((b & 0x0F) | 0x30 for b in range(256))


def make_tree(src: Path) -> None:
    """~70% of the bytes in 24 MiB dumps, the rest in 64 KiB..1 MiB logs, interleaved as a real run dir is."""
    rng = random.Random(18)
    target = int(RAW_GB * 2**30)
    written, i = 0, 0
    while written < target:
        run = src / f"dumps/run{i // 20:02d}"
        run.mkdir(parents=True, exist_ok=True)
        if i % 4 == 0:
            size = 24 << 20
            (run / f"breakdown_{i:04d}.bin").write_bytes(rng.randbytes(size).translate(LOW_ENTROPY))
        else:
            size = rng.randint(64 << 10, 1 << 20)
            line = f"step accept_len={rng.randint(1, 7)} phase=verify t={rng.random():.6f}\n".encode()
            (run / f"log_{i:04d}.txt").write_bytes((line * (size // len(line) + 1))[:size])
        written += size
        i += 1


def timed(cmd: list[str] | str, shell: bool = False, runs: int = 1) -> tuple[float, int]:
    """(median seconds, peak RSS in MiB of the child) of a whole command."""
    times, rss = [], 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t = time.perf_counter()
        subprocess.run(cmd, shell=shell, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
        rss = max(rss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before)
    times.sort()
    return times[len(times) // 2], rss // 1024


def rss_of(cmd: list[str]) -> tuple[float, int]:
    """Time and peak RSS of one command, through GNU time so each child is measured alone."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", *cmd], capture_output=True, text=True, check=True)
    secs, kb = out.stderr.strip().splitlines()[-1].split()
    return float(secs), int(kb) // 1024


def members_at(db: Path, archive: str) -> dict[str, tuple[str, int, int]]:
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT m.path, m.data_offset, m.size FROM members m JOIN archives a ON a.id = m.archive_id "
        "JOIN files f ON f.id = a.file_id WHERE f.path LIKE ? AND m.type = 'file' AND m.size < 2000000 "
        "ORDER BY m.data_offset",
        (f"%{archive}",),
    ).fetchall()
    return {"start": rows[1], "middle": rows[len(rows) // 2], "end": rows[-1]}


def ratarmount_cp(archive: Path, index: Path, member: str, out: Path, mnt: Path) -> None:
    subprocess.run(["ratarmount", "--index-file", str(index), str(archive), str(mnt)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        shutil.copyfile(mnt / member, out)
    finally:
        subprocess.run(["fusermount", "-u", str(mnt)], check=False)


def main() -> None:
    vault = shutil.which("vault") or sys.exit("install cloudvault first: pip install .")
    have_ratarmount = bool(shutil.which("ratarmount") and shutil.which("fusermount") and os.path.exists("/dev/fuse"))
    work = Path(tempfile.mkdtemp(prefix="vault-bench-extract-"))
    try:
        src, mirror = work / "src", work / "mirror" / "018_bench" / "data"
        mirror.mkdir(parents=True)
        t = time.perf_counter()
        make_tree(src)
        subprocess.run(["tar", "--format=gnu", "-C", str(src), "-cf", str(work / "a.tar"), "."], check=True)
        raw = (work / "a.tar").stat().st_size
        single, multi = mirror / "single.tar.zst", mirror / "multi.tar.zst"
        subprocess.run(["zstd", "-q", "-T0", "-3", str(work / "a.tar"), "-o", str(single)], check=True)
        subprocess.run(["pzstd", "-q", "-p", "2", "-3", str(work / "a.tar"), "-o", str(multi)], check=True)
        shutil.rmtree(src)
        (work / "a.tar").unlink()
        print(f"archive: {raw / 2**30:.2f} GiB raw; single-frame {single.stat().st_size / 2**20:.0f} MiB, "
              f"pzstd {multi.stat().st_size / 2**20:.0f} MiB; built in {time.perf_counter() - t:.0f} s")  # fmt: skip
        db = work / "catalog.db"

        print("\n== index (whole process; BLAKE3 of every member and of the archive) ==")
        for archive in (single, multi):
            zstd_s, zstd_rss = rss_of(["zstd", "-q", "-d", "-c", "-o", "/dev/null", str(archive)])
            one = mirror.parent.parent / f"only_{archive.stem}"
            (one / "018_bench").mkdir(parents=True)
            os.link(archive, one / "018_bench" / archive.name)
            vault_s, vault_rss = rss_of([vault, "--catalog", str(work / f"{archive.stem}.db"), "index", "-q",
                                         "--workers", "1", str(one)])  # fmt: skip
            line = (f"{archive.name:<16} vault index {vault_s:6.2f} s ({raw / vault_s / 2**20:5.0f} MiB/s raw, "
                    f"{vault_rss} MiB RSS) | zstd -dc >/dev/null {zstd_s:6.2f} s ({zstd_rss} MiB) | "
                    f"speed vs zstd {zstd_s / vault_s:.2f}x")  # fmt: skip
            if have_ratarmount:
                mnt = work / "mnt"
                mnt.mkdir(exist_ok=True)
                index = work / f"{archive.name}.ratarmount.sqlite"
                rm_s, rm_rss = rss_of(["ratarmount", "--index-file", str(index), str(archive), str(mnt)])
                subprocess.run(["fusermount", "-u", str(mnt)], check=False)
                line += f" | ratarmount index {rm_s:6.2f} s ({rm_rss} MiB)"
            print(line)
        subprocess.run([vault, "--catalog", str(db), "index", "-q", str(work / "mirror")], check=True)

        print("\n== extract one member (whole process, median of 3) ==")
        print(f"{'archive':<16}{'where':<8}{'vault':>9}{'tar -xf':>10}{'ratio':>8}{'floor':>9}{'v/floor':>9}"
              f"{'ratarmount':>12}")  # fmt: skip
        for archive in (single, multi):
            for where, (member, offset, size) in members_at(db, archive.name).items():
                out = work / "out"
                out.mkdir(exist_ok=True)
                v, _ = timed([vault, "--catalog", str(db), "extract", "018", member, "--archive", archive.stem,
                              "-o", str(out), "--force"], runs=3)  # fmt: skip
                tar, _ = timed(["tar", "-I", "zstd", "-C", str(out), "-xf", str(archive), f"./{member}"], runs=1)
                floor, _ = timed(f"zstd -q -dc {archive} | head -c {offset + size} > /dev/null", shell=True, runs=3)
                rm = ""
                if have_ratarmount:
                    index = work / f"{archive.name}.ratarmount.sqlite"
                    t0 = time.perf_counter()
                    ratarmount_cp(archive, index, member, out / "rm.bin", work / "mnt")
                    rm = f"{time.perf_counter() - t0:10.3f}s"
                print(f"{archive.name:<16}{where:<8}{v:8.3f}s{tar:9.3f}s{tar / v:7.1f}x{floor:8.3f}s"
                      f"{v / floor:8.2f}x  {rm}")  # fmt: skip

        print("\n== vault optimize (seekable copy of the single-frame archive) ==")
        t0 = time.perf_counter()
        subprocess.run([vault, "--catalog", str(db), "optimize", "018"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        opt_s = time.perf_counter() - t0
        copy = sqlite3.connect(db).execute("SELECT comp_size, frame_count FROM seekable").fetchone()
        print(f"optimize {opt_s:.1f} s; copy {copy[0] / 2**20:.0f} MiB ({copy[0] / single.stat().st_size:.2f}x the "
              f"original), {copy[1]} frames")  # fmt: skip
        for where, (member, _offset, _size) in members_at(db, single.name).items():
            v, _ = timed([vault, "--catalog", str(db), "extract", "018", member, "--archive", "single",
                          "-o", str(work / "out"), "--force"], runs=3)  # fmt: skip
            print(f"single.tar.zst  {where:<8} from the seekable copy {v:.3f} s")
        help_s, _ = timed([vault, "--help"], runs=5)
        print(f"\nvault --help: {help_s * 1000:.0f} ms")
    finally:
        if have_ratarmount:
            subprocess.run(["fusermount", "-u", str(work / "mnt")], check=False, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
