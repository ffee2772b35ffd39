"""`vault index` of a .zip against `unzip -p > /dev/null`, whole processes in one run: `python bench/formats_zip.py`.

Builds in a temp folder a lab-like zip of BENCH_MB (default 512) MiB raw, written by Info-ZIP `zip -6`: fp16-like
dumps (large members), varied logs, and BENCH_SMALL (default 20000) small json files. Then runs, interleaved
(unzip, vault, unzip, vault ...; BENCH_REPEAT turns, default 5), `unzip -p x.zip > /dev/null` (every member
decompressed and CRC-checked) and `vault index` of a mirror holding it (every member decompressed, CRC-checked,
BLAKE3- and piece-hashed, secret-scanned, written to a fresh catalog), and prints the medians, the ratio
unzip time / vault time of the medians and the median of each turn's ratio (the issue asks >= 0.9). VAULT
names the vault to run (default: `vault` on PATH; a plain `pip install .` venv measures what users get).
"""

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

sys.path.insert(0, os.path.dirname(__file__))
from index import fp16_like, log_pool  # noqa: E402  (bench/index.py's lab-like data)

RAW_MB = int(os.environ.get("BENCH_MB", "512"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
SMALL = int(os.environ.get("BENCH_SMALL", "20000"))


def lab_zip(work: Path) -> Path:
    """A zip of dumps (half the bytes), logs and small json files, by Info-ZIP zip -6."""
    rng = random.Random(7)
    src = work / "src"
    (src / "dumps").mkdir(parents=True)
    (src / "logs").mkdir()
    (src / "meta").mkdir()
    half = RAW_MB << 19
    for i in range(max(1, half // (32 << 20))):
        (src / f"dumps/act_{i:03d}.bin").write_bytes(fp16_like(rng, min(32 << 20, half)))
    pool = log_pool(rng)
    logs = max(1, (half - SMALL * 400) // (256 << 10))
    for i in range(logs):
        at = rng.randrange(0, len(pool) - (256 << 10))
        (src / f"logs/run_{i:05d}.log").write_bytes(pool[at : at + (256 << 10)])
    for i in range(SMALL):
        (src / f"meta/{i:06d}.json").write_text(f'{{"step": {i}, "loss": {rng.random():.5f}, "ok": true}}\n')
    mirror = work / "mirror" / "018_bench" / "data"
    mirror.mkdir(parents=True)
    archive = mirror / "lab.zip"
    subprocess.run(["zip", "-q", "-r", "-6", str(archive), "."], cwd=src, check=True)
    shutil.rmtree(src)
    return archive


def timed(cmd: list[str], **kw) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, **kw)
    return time.perf_counter() - start


def main() -> None:
    vault = os.environ.get("VAULT") or shutil.which("vault") or sys.exit("pip install . first")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="bench-zip-") as tmp:
        work = Path(tmp)
        archive = lab_zip(work)
        print(f"{archive.stat().st_size / 2**20:,.0f} MiB zip of {RAW_MB} MiB raw ({SMALL:,} small members)")
        unzip_times, vault_times = [], []
        for turn in range(REPEAT):
            with open(os.devnull, "wb") as null:
                unzip_times.append(timed(["unzip", "-p", str(archive)], stdout=null))
            catalog = work / f"c{turn}.db"
            vault_times.append(timed([vault, "--catalog", str(catalog), "index", "-q", str(work / "mirror")]))
            catalog.unlink()
        u, v = statistics.median(unzip_times), statistics.median(vault_times)
        print(f"unzip -p > /dev/null  median {u:6.2f} s  runs {', '.join(f'{t:.2f}' for t in unzip_times)}")
        print(f"vault index           median {v:6.2f} s  runs {', '.join(f'{t:.2f}' for t in vault_times)}")
        paired = statistics.median(a / b for a, b in zip(unzip_times, vault_times, strict=True))
        print(
            f"ratio unzip/vault {u / v:.2f} of the medians, {paired:.2f} the median of paired turns "
            "(>= 0.9 asked; above 1: vault faster)"
        )


if __name__ == "__main__":
    main()
