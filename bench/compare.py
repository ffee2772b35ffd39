"""`vault compare` at a serving benchmark's scale: two runs' per_request.csv (seed 001's columns) of 1k, 10k, 100k
and 300k requests with two baselines, as whole processes. Prints rows vs seconds (wall and CPU), peak RSS and the
file's size; run in one go: `python bench/compare.py` (BENCH_ROWS=1000,10000 for other sizes, BENCH_TIMEOUT=s)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROWS = [int(n) for n in os.environ.get("BENCH_ROWS", "1000,10000,100000,300000").split(",")]
TIMEOUT = float(os.environ.get("BENCH_TIMEOUT", 600))
HEADER = "idx,doc_id,role,temperature,prompt_tokens,gpu,output_tokens,ttft_s,tpot_ms,e2e_s,tps,finish\n"


def write_run(path: Path, n: int, seed: int) -> int:
    """A run of n requests (8 GPUs, the first 16 warm-ups): the same prompts and outputs for every seed, timings
    off by a per-run factor (within 1%) and a per-request jitter (within 5%). Returns the file's size."""
    docs, jitter = random.Random(0), random.Random(seed)
    run = 1 + jitter.uniform(-0.01, 0.01)
    lines = [HEADER]
    for i in range(n):
        doc, prompt, out = f"{docs.getrandbits(96):024x}", docs.randint(64, 8192), docs.randint(16, 1024)
        tpot = (10 + prompt / 2000) * run * (1 + jitter.uniform(-0.05, 0.05))
        ttft = (0.02 + prompt / 40000) * run * (1 + jitter.uniform(-0.05, 0.05))
        e2e = ttft + tpot / 1000 * (out - 1)
        role = "warmup" if i < 16 else "measured"
        lines.append(f"{i},{doc},{role},0,{prompt},{i % 8},{out},{ttft:.4f},{tpot:.3f},{e2e:.4f},{out / e2e:.1f},"
                     f"{'cap' if out == 1024 else 'stop'}\n")  # fmt: skip
    path.mkdir(parents=True)
    (path / "per_request.csv").write_text("".join(lines))
    return (path / "per_request.csv").stat().st_size


def measure(work: Path, n: int) -> tuple[float | None, float, int, int]:
    """(seconds or None past TIMEOUT, CPU seconds, peak RSS in bytes, the file's size) of one compare of n rows."""
    size = 0
    for name, seed in (("a", 1), ("b", 2), ("c", 3), ("d", 4)):
        size = write_run(work / f"{n}/{name}", n, seed)
    runs = [str(work / f"{n}/{name}") for name in "abcd"]
    command = ["vault", "compare", runs[0], runs[1], "--baseline", runs[2], "--baseline", runs[3]]
    env = {**os.environ, "VAULT_CATALOG": str(work / "none.db"), "PYTHONDONTWRITEBYTECODE": ""}
    started = time.monotonic()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    while (done := os.wait4(child.pid, os.WNOHANG))[0] == 0:
        if time.monotonic() - started > TIMEOUT:
            child.kill()
            done = os.wait4(child.pid, 0)
            return None, done[2].ru_utime + done[2].ru_stime, done[2].ru_maxrss * 1024, size
        time.sleep(0.02)
    seconds = time.monotonic() - started
    child.returncode = os.waitstatus_to_exitcode(done[1])
    if child.returncode not in (0, 10):
        sys.exit(f"vault compare exit {child.returncode}: {child.stderr.read().decode()}")
    return seconds, done[2].ru_utime + done[2].ru_stime, done[2].ru_maxrss * 1024, size


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall seconds grow with it; CPU less so)")
    print(f"{'rows':>8} {'seconds':>8} {'CPU s':>7} {'peak RSS MB':>12} {'file MB':>8} {'RSS/file':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in ROWS:
            seconds, cpu, rss, size = measure(Path(tmp), n)
            took = f"{seconds:8.2f}" if seconds is not None else f">{TIMEOUT:7.0f}"
            print(f"{n:>8,} {took} {cpu:7.2f} {rss / 1e6:12.1f} {size / 1e6:8.2f} {rss / size:9.1f}", flush=True)


if __name__ == "__main__":
    main()
