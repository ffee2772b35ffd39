"""`vault index` of a .tar.gz against `pigz -dc > /dev/null`, and one member out of it against `tar -xzf` and
ratarmount with its index: whole processes, paired and interleaved in one run (`python bench/formats.py`).

Builds, in a temp folder, a lab-like tar of BENCH_MB (default 2048; `--mb 256` for a quick run) MiB (bench/index.py's
dumps, logs and json) compressed by `pigz -p 2` (what `tar -czf` writes, faster to make). Then BENCH_REPEAT
(default 3) turns of, each in this order: `vault index` of a mirror holding it (a fresh catalog each turn), `pigz
-dc > /dev/null`; both on CORES (default 2) cores (taskset); medians, and the ratio pigz time / vault time (the
issue asks >= 0.9). Then one member near the archive's end: `vault extract ... -o -` (the catalog from the index
above), `tar -xzf ARCHIVE MEMBER -O`, and ratarmount's SQLiteIndexedTar with its index already built (if
ratarmountcore is installed), each whole processes, medians of REPEAT; the issue asks vault under 0.2 s. VAULT names
the vaults to run, space-separated (default: `vault` on PATH; a plain `pip install .[formats]` venv measures what
users get). The machine's load is printed: on a shared machine, read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from index import lab_tar  # noqa: E402  (bench/index.py: the same lab-like data)

REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
CORES = os.environ.get("CORES", "2")
RATARMOUNT = """
import sys
from ratarmountcore.mountsource.formats.tar import SQLiteIndexedTar
with SQLiteIndexedTar(sys.argv[1], writeIndex=True, indexFilePath=sys.argv[2]) as t:
    with t.open(t.lookup("/" + sys.argv[3])) as fh:
        while fh.read(1 << 20):
            pass
"""


def pinned(cmd: list[str]) -> list[str]:
    """cmd on CORES cores (the first ones), where taskset is there."""
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", f"0-{int(CORES) - 1}", *cmd]
    return cmd


def timed(cmd: list[str] | str, shell: bool = False) -> float:
    start = time.perf_counter()
    out = subprocess.run(cmd, shell=shell, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {cmd}\n{out.stderr.decode()[-2000:]}")
    return time.perf_counter() - start


def build(work: Path, mb: int) -> tuple[Path, str]:
    """The mirror (one entry holding lab.tar.gz) and the path of a member near its end."""
    entry = work / "mirror" / "001_bench"
    entry.mkdir(parents=True)
    tar = work / "lab.tar"
    lab_tar(tar, True, raw_mb=mb)
    listing = subprocess.run(["tar", "-tf", str(tar)], capture_output=True, text=True, check=True).stdout.split()
    with open(tar, "rb") as src, open(entry / "lab.tar.gz", "wb") as dst:
        subprocess.run(["pigz", "-p", "2", "-c"], stdin=src, stdout=dst, check=True)
    tar.unlink()
    member = next(m for m in reversed(listing[: len(listing) * 9 // 10]) if m.endswith(".log"))
    return entry / "lab.tar.gz", member


def index_ratio(vaults: list[str], work: Path, archive: Path) -> None:
    times: dict[str, list[float]] = {v: [] for v in vaults} | {"pigz": []}
    for turn in range(REPEAT):
        for vault in vaults:
            db = work / f"catalog-{turn}-{vaults.index(vault)}.db"
            times[vault].append(timed(pinned([vault, "--catalog", str(db), "index", "--quiet", str(work / "mirror")])))
        times["pigz"].append(timed(" ".join(pinned(["pigz", "-dc", str(archive)])) + " > /dev/null", shell=True))
    pigz = statistics.median(times["pigz"])
    print(f"index of a {archive.stat().st_size / 2**30:.2f} GiB .tar.gz on {CORES} cores (median of {REPEAT}):")
    print(f"  pigz -dc > /dev/null: {pigz:.2f} s  {times['pigz']}")
    for vault in vaults:
        mine = statistics.median(times[vault])
        print(f"  {vault} index: {mine:.2f} s  ratio pigz/vault {pigz / mine:.2f} (issue: >= 0.9)  {times[vault]}")


def member_ratio(vaults: list[str], work: Path, archive: Path, member: str) -> None:
    index = work / "ratarmount.index.sqlite"
    peers: dict[str, list[str]] = {"tar -xzf": ["tar", "-xzf", str(archive), "-O", member]}
    try:
        import ratarmountcore  # noqa: F401

        peers["ratarmount (indexed)"] = [sys.executable, "-c", RATARMOUNT, str(archive), str(index), member]
        timed(peers["ratarmount (indexed)"])  # builds its index once, outside the timing
    except ImportError:
        print("  (ratarmountcore is not installed: pip install ratarmountcore to time it too)")
    db = work / "catalog-0-0.db"
    runs = {v: [v, "--catalog", str(db), "extract", "001", f"lab.tar.gz/{member}", "-o", "-"] for v in vaults}
    times: dict[str, list[float]] = {name: [] for name in [*runs, *peers]}
    for _ in range(REPEAT):
        for name, cmd in [*runs.items(), *peers.items()]:
            times[name].append(timed(cmd))
    print(f"one member ({member}) out of it, whole processes (median of {REPEAT}):")
    for name in times:
        print(f"  {name}: {statistics.median(times[name]):.3f} s  {[round(t, 3) for t in times[name]]}")
    for vault in vaults:
        mine = statistics.median(times[vault])
        print(f"  {vault}: {'under' if mine < 0.2 else 'OVER'} 0.2 s; tar -xzf/vault "
              f"{statistics.median(times['tar -xzf']) / mine:.0f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=int(os.environ.get("BENCH_MB", "2048")), help="MiB of tar")
    args = parser.parse_args()
    for tool in ("pigz", "tar"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed")
    vaults = os.environ.get("VAULT", "vault").split()
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores present")
    with tempfile.TemporaryDirectory(prefix="vault-bench-formats-") as tmp:
        work = Path(tmp)
        archive, member = build(work, args.mb)
        index_ratio(vaults, work, archive)
        member_ratio(vaults, work, archive, member)
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
