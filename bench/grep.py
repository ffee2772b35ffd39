"""`vault grep` over lab-like archives against the floor (`zstd -dc ARCHIVE | grep -c`, summed per archive) and
Debian's `ugrep -z -r`: one run, `python bench/grep.py`, figures side by side with their ratios.

The mirror is one entry of three archives made as bench/index.py makes them: lab data as one zstd frame, the same
tar as pzstd frames, and 200,000 small members (BENCH_SMALL) as one frame. Two patterns: a literal in no member (every
byte is read, nothing printed) and a regex on a few lines. vault is the command on PATH, or VAULT (install it with a
plain `pip install .` in a clean venv); the peak RSS of each vault grep is shown. BENCH_MB (default 1024) sizes
the lab archives; BENCH_REPEAT (default 3) the turns, of which the best is kept.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from index import RAW_MB, SMALL, lab_mirror  # noqa: E402  (bench/index.py's archives)

REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
PATTERNS = {"absent literal": "xyzzy-not-in-any-member", "rare regex": "grad_norm=9999[0-9]"}


def measure(cmd: list[str]) -> tuple[float, int]:
    """Seconds and peak RSS (MiB) of one vault grep, through GNU time (exit 0 or 1: found or not)."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)  # fmt: skip
    if out.returncode not in (0, 1):
        sys.exit(f"{cmd[0]} failed: {out.stderr[-2000:]}")
    secs, kb = out.stderr.strip().splitlines()[-1].split()
    return float(secs), int(kb) // 1024


def timed(cmd: str) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def best(runs: dict[str, object]) -> dict[str, float]:
    """Each command's best time over REPEAT turns, the commands taking turns (a busy machine loads them alike)."""
    times: dict[str, float] = {}
    for _ in range(REPEAT):
        for name, run in runs.items():
            took = run()
            times[name] = min(times.get(name, took), took)
    return times


def main() -> None:
    vault = os.environ.get("VAULT") or shutil.which("vault") or sys.exit("install vault (pip install .) or set VAULT")
    ugrep = shutil.which("ugrep")
    work = Path(tempfile.mkdtemp(prefix="vault-bench-grep-"))
    try:
        t = time.perf_counter()
        archives = sorted((lab_mirror(work) / "018_bench").glob("*.tar.zst"))
        print(f"built {len(archives)} archives (lab ~{RAW_MB} MiB raw, {SMALL} small members) in "
              f"{time.perf_counter() - t:.0f} s; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
        db = work / "catalog.db"
        subprocess.run([vault, "--catalog", str(db), "index", "-q", str(work / "mirror")], check=True)
        for label, pattern in PATTERNS.items():
            runs = {
                "floor": lambda p=pattern: sum(timed(f"zstd -dc {a} | grep -c -E '{p}'") for a in archives),
                "vault": lambda p=pattern: measure([vault, "--catalog", str(db), "grep", "-c", p])[0],
            }
            if ugrep:
                runs["ugrep"] = lambda p=pattern: timed(f"{ugrep} -z -r -c -E '{p}' {work / 'mirror'}")
            times = best(runs)
            rss = measure([vault, "--catalog", str(db), "grep", "-c", pattern])[1]
            line = (f"{label:<15} floor {times['floor']:6.2f}s  vault grep {times['vault']:6.2f}s "
                    f"({times['floor'] / times['vault']:.2f}x the floor's speed, peak RSS {rss} MiB)")  # fmt: skip
            if ugrep:
                line += f"  ugrep -z -r {times['ugrep']:6.2f}s ({times['ugrep'] / times['vault']:.2f}x vault's time)"
            print(line)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
