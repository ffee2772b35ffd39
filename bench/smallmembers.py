"""`vault index` of many small members against `zstd -dc > /dev/null`, and vaults against each other, in one run:
`VAULT="BEFORE/bin/vault AFTER/bin/vault" python bench/smallmembers.py`.

Builds (bench/index.py's makers, in a temp folder) the archive of BENCH_SMALL (default 200000) small logs and json
as one zstd frame, and lab-like archives of BENCH_MB (default 256) MiB raw as one frame and as pzstd frames. Then,
BENCH_TURNS (default 5) times, `zstd -dc` and every vault index each archive from scratch, taking turns in an order
that rotates each turn (so that a busy machine's load falls on all alike); medians are compared. Prints, per
archive and vault, the median seconds (wall, and CPU: user + system), the vault's speed as a share of zstd's
(zstd seconds / vault seconds: issue 38 asks 0.5x for the small members) and, for the second vault on, its speed
against the first's (paired turns: the median of the per-turn ratios). VAULT names the vaults (default: `vault`
on PATH). For a before and after, two plain installs:

    git -C REPO archive 71e8911 --prefix=before/ | tar -x -C /tmp
    python3 -m venv /tmp/vb && /tmp/vb/bin/pip install /tmp/before
    python3 -m venv /tmp/va && /tmp/va/bin/pip install REPO
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

os.environ.setdefault("BENCH_SMALL", "200000")  # whatever BENCH_MB is (bench/index.py scales it with that)
sys.path.insert(0, str(Path(__file__).parent))
import index as makers  # noqa: E402 (bench/index.py: the same archives its table reads)

TURNS = int(os.environ.get("BENCH_TURNS", "5"))
LAB_MB = int(os.environ.get("BENCH_MB", "256"))


def build(work: Path) -> list[Path]:
    """The small-member archive and the lab-like ones, each alone in a mirror of one entry."""
    made = []
    lab = work / "lab.tar"
    makers.lab_tar(lab, True, raw_mb=LAB_MB)
    small = work / "small.tar"
    makers.small_tar(small)
    for name, tar, how in (("small_members", small, ["zstd", "-q", "-T0", "-3"]),
                           ("lab_one_frame", lab, ["zstd", "-q", "-T0", "-3"]),
                           ("lab_pzstd", lab, ["pzstd", "-q", "-p", "2", "-3"])):  # fmt: skip
        entry = work / name / "018_bench"
        entry.mkdir(parents=True)
        subprocess.run([*how, str(tar), "-o", str(entry / f"{name}.tar.zst")], check=True)
        made.append(entry / f"{name}.tar.zst")
    lab.unlink()
    small.unlink()
    return made


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, user + system CPU seconds) of one whole process."""
    before = os.times()
    started = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - started
    after = os.times()
    if done.returncode not in (0, 5):
        sys.exit(f"{cmd[0]} failed: {done.stderr.decode()[-2000:]}")
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def turns(archive: Path, vaults: list[str], work: Path) -> dict[str, list[tuple[float, float]]]:
    """TURNS paired turns of zstd and every vault on one archive, the order rotated each turn; every vault turn
    indexes into a new catalog."""
    runners = {"zstd": (["zstd", "-q", "-d", "-c", "-o", "/dev/null", str(archive)], None)}
    for n, vault in enumerate(vaults):
        db = work / f"{archive.stem}.{n}.db"
        runners[vault] = ([vault, "--catalog", str(db), "index", "-q", str(archive.parent.parent)], db)
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
    names = list(runners)
    for turn in range(TURNS):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            cmd, db = runners[name]
            for old in work.glob(f"{db.name}*") if db else ():
                old.unlink()
            found[name].append(timed(cmd))
    return found


def report(archive: Path, found: dict[str, list[tuple[float, float]]], vaults: list[str]) -> None:
    zstd_wall = statistics.median(w for w, _ in found["zstd"])
    print(f"\n{archive.name} ({makers.tar_size(archive) >> 20} MiB raw): zstd -dc {zstd_wall:.2f} s")
    for vault in vaults:
        wall = statistics.median(w for w, _ in found[vault])
        cpu = statistics.median(c for _, c in found[vault])
        line = f"  {wall:6.2f} s wall, {cpu:6.2f} s CPU, {zstd_wall / wall:5.2f}x zstd's speed"
        if vault != vaults[0]:
            paired = statistics.median(b[0] / a[0] for a, b in zip(found[vault], found[vaults[0]], strict=True))
            line += f", {paired:4.2f}x the first vault's speed (paired turns)"
        print(f"{line}  {vault}")


def main() -> None:
    vaults = os.environ.get("VAULT", "").split() or [shutil.which("vault") or sys.exit("pip install . first")]
    work = Path(tempfile.mkdtemp(prefix="vault-bench-small-"))
    try:
        started = time.perf_counter()
        archives = build(work)
        print(f"built in {time.perf_counter() - started:.0f} s: {makers.SMALL} small members, lab-like {LAB_MB} MiB; "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {TURNS} turns, medians")  # fmt: skip
        for archive in archives:
            report(archive, turns(archive, vaults, work), vaults)
        print(f"\nload average after: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
