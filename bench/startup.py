"""Start-up time of every command as a ratio to the floor `python -c "import sqlite3, zstandard, blake3"`.

Budget (issue 7): search and a small extract at most 1.4x the floor, every other command at most 2x.
Run in one go from a plain `pip install .` in a clean venv (bytecode compiled at install), with
PYTHONDONTWRITEBYTECODE unset: `python bench/startup.py`. Prints medians and ratios; exit 1 over budget.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = int(os.environ.get("BENCH_RUNS", 21))
FLOOR = [sys.executable, "-c", "import sqlite3, zstandard, blake3"]


def timed(argv: list[str], env: dict) -> float:
    best = []
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        best.append(time.perf_counter() - started)
    return statistics.median(best)


def main() -> int:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    work = Path(tempfile.mkdtemp(prefix="vault-startup-"))
    db = str(work / "catalog.db")
    script = Path(sys.executable).with_name("vault")  # what users run: the console script, not python -m
    vault = [str(script) if script.exists() else sys.executable, *([] if script.exists() else ["-m", "cloudvault"]),
             "--catalog", db]  # fmt: skip
    subprocess.run([*vault, "demo", "--dir", str(work / "demo")], env=env, capture_output=True, check=True)
    member = "compaction_meta.json"
    cases = [
        ("search granite", ["search", "granite"], 1.4),
        ("extract (small member)", ["extract", "018", member, "-o", str(work / "out"), "--force"], 1.4),
        ("show 014", ["show", "014"], 2.0),
        ("ls 018", ["ls", "018"], 2.0),
        ("verify 013", ["verify", "013"], 2.0),
        ("--help", ["--help"], 2.0),
        ("search --help", ["search", "--help"], 2.0),
    ]
    for label, args, _ in cases:  # a command that fails would time its error path, not its work
        done = subprocess.run([*vault, *args], env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"vault {label} exited {done.returncode}: {done.stderr.strip()}")
    floor = timed(FLOOR, env)
    print(f"floor (python -c 'import sqlite3, zstandard, blake3'): {floor * 1000:.1f} ms median of {RUNS}")
    over = 0
    for label, args, budget in cases:
        took = timed([*vault, *args], env)
        ratio = took / floor
        verdict = "ok" if ratio <= budget else "OVER BUDGET"
        over += ratio > budget
        print(f"  vault {label:<24} {took * 1000:6.1f} ms  {ratio:4.2f}x floor  (budget {budget}x)  {verdict}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
