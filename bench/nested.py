"""Archives inside archives (archive/nested.py): what opening them one level deeper costs. `python bench/nested.py`

Ratios, each the median of BENCH_REPEAT (default 5) turns taken in turn (before, after, tar, ...) in one run:
- index of a .tar.zst of 20,000 small members holding no archive, after / before: the cost of looking at every
  member's name (and an archive-named member's first bytes) while indexing; at or below 1.02 is no cost.
- index of a .tar.zst holding a .tar.gz member (BENCH_MB MiB of members, default 64), after / before: the second
  archive's scan (before, the member is hashed only); the floor is 1 + (index of that .tgz as a file / before).
- one member out of the nested .tar.gz: `vault extract` / `tar -xOf outer member | tar -xzO path`.
BEFORE_SRC: a source tree of vault before (e.g. `git archive main | tar -x -C /tmp/before`), run with PYTHONPATH;
without it, the before figures are skipped. After: the vault importable by this Python.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
MB = int(os.environ.get("BENCH_MB", "64"))
BEFORE = os.environ.get("BEFORE_SRC")


def vault(src: str | None, *args: str) -> float:
    """Seconds one `vault` command takes (src: the source tree to run, None for the installed one)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    if src:
        env["PYTHONPATH"] = src
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cloudvault", *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - t


def shell(command: str, cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run(command, shell=True, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t


def build(work: Path) -> None:
    """small/ (20,000 small members, no archive), nested/ (outer.tar.zst holding data/inner.tar.gz), tgz/ (that
    inner.tar.gz as a file of its own)."""
    rng = random.Random(36)
    words = [bytes(rng.choice(b"abcdefghij ") for _ in range(8)) for _ in range(500)]
    small = work / "src_small"
    for i in range(20_000):
        folder = small / f"d{i // 500:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:05d}.txt").write_bytes(b" ".join(rng.choices(words, k=60)))
    (work / "small/001_s").mkdir(parents=True)
    subprocess.run(["tar", "--zstd", "-cf", str(work / "small/001_s/small.tar.zst"), "."], cwd=small, check=True)
    inner = work / "src_inner/src"
    for i in range(MB * 4):
        folder = inner / f"d{i // 64:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{i:05d}.bin").write_bytes(b" ".join(rng.choices(words, k=(256 << 10) // 9))[: 256 << 10])
    (work / "staged/data").mkdir(parents=True)
    subprocess.run(["tar", "-czf", str(work / "staged/data/inner.tar.gz"), "src"], cwd=inner.parent, check=True)
    (work / "nested/001_n").mkdir(parents=True)
    subprocess.run(["tar", "--zstd", "-cf", str(work / "nested/001_n/outer.tar.zst"), "data"], cwd=work / "staged",
                   check=True)  # fmt: skip
    (work / "tgz/001_t").mkdir(parents=True)
    os.link(work / "staged/data/inner.tar.gz", work / "tgz/001_t/inner.tar.gz")


def index_time(src: str | None, work: Path, mirror: str, turn: int, tag: str) -> float:
    db = work / f"c-{mirror}-{tag}-{turn}.db"
    return vault(src, "--catalog", str(db), "index", "-q", str(work / mirror))


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-nested-") as tmp:
        work = Path(tmp)
        build(work)
        times: dict[str, list[float]] = {}
        for turn in range(REPEAT):
            for mirror in ("small", "nested", "tgz"):
                for tag, src in (("before", BEFORE), ("after", None)):
                    if tag == "before" and not BEFORE or (mirror == "tgz" and tag == "before"):
                        continue
                    times.setdefault(f"{mirror} {tag}", []).append(index_time(src, work, mirror, turn, tag))
            db = work / f"c-nested-after-{turn}.db"
            at = MB * 3  # a member three quarters into the inner archive
            name = f"src/d{at // 64:03d}/m{at:05d}.bin"
            member = f"data/inner.tar.gz/{name}"
            times.setdefault("extract vault", []).append(vault(None, "--catalog", str(db), "extract", "001", member,
                                                               "-o", str(work / f"out{turn}")))  # fmt: skip
            pipe = f"tar -xOf nested/001_n/outer.tar.zst data/inner.tar.gz | tar -xzO {name} > /dev/null"
            times.setdefault("extract tar", []).append(shell(pipe, work))
        med = {k: statistics.median(v) for k, v in times.items()}
        spread = {k: (max(v) - min(v)) / statistics.median(v) for k, v in times.items()}
        for k in sorted(med):
            print(f"{k:16s} {med[k]:7.3f} s  (spread {spread[k]:.0%} over {len(times[k])} turns)")
        if BEFORE:
            print(f"ratio index small, after / before:  {med['small after'] / med['small before']:.3f}")
            print(f"ratio index nested, after / before: {med['nested after'] / med['nested before']:.3f}  (floor "
                  f"{1 + med['tgz after'] / med['nested before']:.3f})")
        print(f"ratio extract nested member, vault / tar pipe: {med['extract vault'] / med['extract tar']:.3f}")


if __name__ == "__main__":
    main()
