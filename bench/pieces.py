"""What piece hashes cost, before against after in one run: `VAULT="old/bin/vault new/bin/vault" python
bench/pieces.py` (two plain `pip install .` venvs; the first is the reference).

On bench/index.py's lab-like archives of BENCH_MB (default 256) MiB raw: `vault index` wall and CPU seconds
(user+sys of the process; on a busy machine CPU is the steadier measure), the vaults taking turns BENCH_REPEAT
(default 3) times, best and median; `vault extract -o -` of the largest member the same way; the catalog's size,
the bytes of piece hashes against the mirror's size, and what a re-index of the unchanged mirror adds; then
`vault extract -o -` of one member of BENCH_MB MiB (zstd -T0, one frame) the same way.

Issue 41's goal (index speed with piece hashes within 5% of the speed without them) is the `speed` column of a
vault with piece hashes against a reference without: a venv of this tree with `PieceHasher.update` hashing only the
whole and `pieces()` returning None (the session of 2026-12-05 patched cloudvault/pieces.py of 71e8911 so), then,
in the same run, the tree before the one-pass hashes (71e8911: two passes) and the tree now.
Where the cost was: every byte hashed twice (the whole BLAKE3, and each MiB's own BLAKE3, whose chunk counter starts
at 0, so no work of one is reused by the other). Now each piece's hash is its BLAKE3 subtree chaining value, the
node the whole hash's tree already holds (cloudvault/_b3tree.c, as Bao does): one pass, where the extension is
built and the CPU has AVX-512 (else two, as before).
"""

from __future__ import annotations

import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
os.environ.setdefault("BENCH_MB", "256")  # before bench/index.py reads it
sys.path.insert(0, str(Path(__file__).parent))
import index as lab  # noqa: E402  (bench/index.py: the archives)


def timed(cmd: list[str], stdout=subprocess.DEVNULL) -> tuple[float, float]:
    """(wall, CPU) seconds of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 5):
        sys.exit(f"{cmd} failed: {done.stderr.decode()[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def turns(commands: dict[str, list[str]], before_each=None) -> dict[str, list[tuple[float, float]]]:
    """Each command REPEAT times, taking turns so that every one sees the same load."""
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(REPEAT):
        for name, cmd in commands.items():
            if before_each:
                before_each(name)
            found[name].append(timed(cmd))
    return found


def row(label: str, found: dict[str, list[tuple[float, float]]], vaults: list[str]) -> None:
    ref = found[vaults[0]]
    for vault in vaults:
        walls, cpus = [w for w, _ in found[vault]], [c for _, c in found[vault]]
        ratio = statistics.median(c for _, c in ref) / statistics.median(cpus)
        print(f"{label:<34}wall best {min(walls):6.2f}s median {statistics.median(walls):6.2f}s  cpu best "
              f"{min(cpus):6.2f}s median {statistics.median(cpus):6.2f}s  speed {ratio:4.2f}x  {vault}")  # fmt: skip


def catalog_figures(db: Path, mirror_bytes: int) -> str:
    conn = sqlite3.connect(db)
    try:
        pieces = conn.execute("SELECT coalesce(sum(length(pieces)), 0) FROM members").fetchone()[0]
        pieces += conn.execute("SELECT coalesce(sum(length(pieces)), 0) FROM files").fetchone()[0]
    except sqlite3.OperationalError:
        pieces = 0  # a vault from before piece hashes
    finally:
        conn.close()
    return (
        f"catalog {db.stat().st_size / 2**20:.2f} MiB, piece hashes {pieces / 1024:.1f} KiB = "
        f"{100 * pieces / mirror_bytes:.4f}% of the mirror's {mirror_bytes / 2**20:.0f} MiB"
    )


def main() -> None:
    import shutil

    vaults = os.environ.get("VAULT", "vault").split()
    work = Path(tempfile.mkdtemp(prefix="vault-bench-pieces-"))
    try:
        measure(vaults, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(vaults: list[str], work: Path) -> None:
    archives = lab.build(work)
    for archive in archives:
        mirror = archive.parent.parent
        dbs = {vault: work / f"{archive.stem}.{n}.db" for n, vault in enumerate(vaults)}
        cmds = {vault: [vault, "--catalog", str(dbs[vault]), "index", "-q", str(mirror)] for vault in vaults}
        row(f"index {archive.name}", turns(cmds, lambda v, dbs=dbs: dbs[v].unlink(missing_ok=True)), vaults)
        for vault in vaults:
            size = dbs[vault].stat().st_size
            subprocess.run(cmds[vault], check=True)  # the unchanged mirror again
            grew = dbs[vault].stat().st_size - size
            print(f"  {catalog_figures(dbs[vault], archive.stat().st_size)}; re-index adds {grew} bytes  {vault}")
    mirror = big_member(work)
    cmds = {}
    for n, vault in enumerate(vaults):
        db = work / f"big.{n}.db"
        subprocess.run([vault, "--catalog", str(db), "index", "-q", str(mirror)], check=True)
        cmds[vault] = [vault, "--catalog", str(db), "extract", "018", "big.bin", "-o", "-"]
    row(f"extract -o - {lab.RAW_MB} MiB member", turns(cmds), vaults)
    print(f"load average after: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def big_member(work: Path) -> Path:
    """A mirror holding one archive (zstd -T0) of one lab-like member of BENCH_MB MiB."""
    import random
    import tarfile

    rng, data = random.Random(5), work / "big.bin"
    with open(data, "wb") as fh:
        for _ in range(lab.RAW_MB // 8):
            fh.write(lab.fp16_like(rng, 8 << 20))
    entry = work / "big" / "018_bench"
    entry.mkdir(parents=True)
    with tarfile.open(work / "big.tar", "w", format=tarfile.GNU_FORMAT) as tar:
        tar.add(data, "big.bin")
    subprocess.run(["zstd", "-q", "-T0", "-3", str(work / "big.tar"), "-o", str(entry / "big.tar.zst")], check=True)
    return entry.parent


if __name__ == "__main__":
    main()
