"""Start-up time of every command as a ratio to the floor `python -c "import sqlite3, zstandard, blake3"`.

Budget (issue 7, issue 38): search and a small extract at most 1.4x the floor, show and ls 1.3x, every other
command at most 2x.
Run in one go from a plain `pip install .` in a clean venv (bytecode compiled at install), with
PYTHONDONTWRITEBYTECODE unset: `python bench/startup.py`. Each command's runs alternate with runs of the floor
and its ratio is to the floor runs beside it, so a machine that gets busier mid-run moves both; how much the floor's
own runs spread is printed beside it (a quiet machine: a few percent). VAULT names the
vault console scripts to time, space-separated (default: the one beside this python); two venvs compare before
and after in one run. Prints medians and ratios; exit 1 over budget.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = int(os.environ.get("BENCH_RUNS", 21))
FLOOR = [sys.executable, "-c", "import sqlite3, zstandard, blake3"]


def timed(argv: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def vault_commands() -> list[list[str]]:
    """What users run: the console script, not python -m (a venv without one falls back to python -m)."""
    named = os.environ.get("VAULT", "").split()
    if named:
        return [[str(Path(v).expanduser())] for v in named]
    script = Path(sys.executable).with_name("vault")
    return [[str(script)] if script.exists() else [sys.executable, "-m", "cloudvault"]]


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="vault-startup-"))
    try:
        return measure(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the demo mirror and its catalog: ~40 MB a run


def measure(work: Path) -> int:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # the demo mirrors made here are registered in a registry of their own, removed with them: recorded in the
    # user's, every later `vault extract -o` of theirs would be guarded against these folders after they are gone
    env["XDG_STATE_HOME"] = str(work / "state")
    vaults = vault_commands()
    dbs = []  # each vault its own demo catalog: one catalog shared would be migrated by the newer vault, and the
    for i, vault in enumerate(vaults):  # older would then time its "catalog too new" error
        dbs.append(str(work / f"catalog{i}.db"))
        subprocess.run([*vault, "--catalog", dbs[-1], "demo", "--dir", str(work / f"demo{i}")], env=env,
                       capture_output=True, check=True)  # fmt: skip
    member = "compaction_meta.json"
    cases = [
        ("search granite", ["search", "granite"], 1.4),
        ("extract (small member)", ["extract", "018", member, "-o", str(work / "out"), "--force"], 1.4),
        ("show 014", ["show", "014"], 1.3),
        ("ls 018", ["ls", "018"], 1.3),
        ("verify 013", ["verify", "013"], 2.0),
        ("--help", ["--help"], 2.0),
        ("search --help", ["search", "--help"], 2.0),
    ]
    for vault, db in zip(vaults, dbs, strict=True):
        for label, args, _ in cases:  # a command that fails would time its error path, not its work
            done = subprocess.run([*vault, "--catalog", db, *args], env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{vault[0]} {label} exited {done.returncode}: {done.stderr.strip()}")
    names = [f" [{Path(v[0]).parent.parent.name}]" if len(vaults) > 1 else "" for v in vaults]  # the venv
    names = [n.ljust(max(map(len, names))) for n in names]
    print(f"floor: python -c 'import sqlite3, zstandard, blake3'; medians of {RUNS} runs, each beside a floor run")
    over = 0
    for label, args, budget in cases:
        floor, took = [], [[] for _ in vaults]
        for _ in range(RUNS):
            floor.append(timed(FLOOR, env))
            for times, vault, db in zip(took, vaults, dbs, strict=True):
                times.append(timed([*vault, "--catalog", db, *args], env))
        base = statistics.median(floor)
        quartiles = statistics.quantiles(floor, n=4)
        noise = f"floor runs +-{(quartiles[2] - quartiles[0]) / 2 / base:.0%}"  # half the interquartile range
        for name, times in zip(names, took, strict=True):
            ratio = statistics.median(times) / base
            verdict = "ok" if ratio <= budget else "OVER BUDGET"
            over += ratio > budget
            print(f"  vault {label:<24}{name} {statistics.median(times) * 1000:6.1f} ms  {ratio:4.2f}x floor "
                  f"({base * 1000:4.1f} ms, {noise})  (budget {budget}x)  {verdict}")  # fmt: skip
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
