"""`vault index` on a many-core node, whole processes in one run: `python bench/scale.py`.

The scaling table: BENCH_ARCHIVES (default 32) lab-like archives (bench/index.py's dumps, logs and json) of
BENCH_MB (default 256) MiB raw each, packed with pzstd -3 (8 MiB frames), in one mirror. For W = 1, 2, 4, ... up
to the cores present (and the cores themselves): the floor, W processes decoding the same archives with
python-zstandard (the C library, what `zstd -dc` does), and `vault index --workers W`, each from a fresh catalog.

One big archive: BIG_MB (default 7600) MiB raw of BIG_MEMBERS (default 76000) venv-like members (many small
text files, some libraries of a few MB, a few of hundreds of MB), packed with `pzstd -p N`: `pzstd -dc -p N`,
`zstd -dc` and `vault index` with --workers 1 and N; the two catalogs' frame tables, member offsets and hashes
must be equal (the bench fails if not).

Slurm: `vault index --slurm N --dry-run` on the table's mirror (its simulation, from a one-second sample of a
task's code) against one task's code timed over every archive of the mirror, as one node runs it.

The archives are made in a temp folder (TMPDIR) and read once before timing (page-cached input). VAULTS names
the vaults to compare as LABEL=PYTHONPATH pairs, space-separated (default: this checkout); each runs as
`python -m cloudvault` with that PYTHONPATH. SCALE_PARTS picks "table", "slurm", "big" (default: all three).
BENCH_REPEAT=N takes the best of N turns. BENCH_PROFILE=FOLDER also records, with py-spy (on PATH), each vault's
--workers N run of the table and of the big archive into FOLDER (collapsed stacks, all processes and threads).
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from index import fp16_like, lab_tar, log_pool  # noqa: E402  (bench/index.py: the same lab-like data)

ARCHIVES = int(os.environ.get("BENCH_ARCHIVES", "32"))
RAW_MB = int(os.environ.get("BENCH_MB", "256"))
BIG_MB = int(os.environ.get("BIG_MB", "7600"))
BIG_MEMBERS = int(os.environ.get("BIG_MEMBERS", "76000"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "1"))
CORES = len(os.sched_getaffinity(0))

FLOOR = """
import sys, zstandard
buf = bytearray(1 << 20)
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        reader = zstandard.ZstdDecompressor(max_window_size=1 << 31).stream_reader(fh, read_across_frames=True)
        while reader.readinto(buf):
            pass
"""


def worker_counts() -> list[int]:
    counts, w = [], 1
    while w < CORES:
        counts.append(w)
        w *= 2
    return [*counts, CORES]


def vaults() -> list[tuple[str, str]]:
    pairs = os.environ.get("VAULTS", "").split()
    here = os.environ.get("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    return [tuple(p.split("=", 1)) for p in pairs] or [("vault", here)]


def timed(cmd: list[str], env: dict | None = None) -> float:
    t = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/")  # `-m` would find ./cloudvault
    took = time.perf_counter() - t
    if out.returncode not in (0, 5):
        sys.exit(f"{cmd[:6]} failed ({out.returncode}): {out.stderr[-3000:]}")
    return took


def vault_index(pythonpath: str, db: Path, root: Path, workers: int) -> float:
    db.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return timed([sys.executable, "-m", "cloudvault", "--catalog", str(db), "index", "-q", "--workers",
                  str(workers), str(root)], env)  # fmt: skip


def profile(name: str, pythonpath: str, root: Path, db: Path) -> None:
    """A py-spy recording (collapsed stacks of every process and thread) of one --workers N run, if asked for."""
    folder = os.environ.get("BENCH_PROFILE")
    if not folder:
        return
    out = Path(folder) / f"{name}.txt"
    for _ in range(3):  # py-spy can miss a process that starts too fast for it: try again
        db.unlink(missing_ok=True)
        subprocess.run(["py-spy", "record", "-r", "200", "--subprocesses", "--native", "--format", "raw", "-o",
                        str(out), "--", sys.executable, "-m", "cloudvault", "--catalog", str(db), "index", "-q",
                        "--workers", str(CORES), str(root)], env={**os.environ, "PYTHONPATH": pythonpath},
                       capture_output=True, cwd="/")  # fmt: skip
        if out.exists():
            return


def floor(archives: list[Path], workers: int) -> float:
    """W processes, the archives dealt out in turn (they are the same size), until the last one ends."""
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", FLOOR, *map(str, archives[i::workers])]) for i in range(workers)]
    if any(p.wait() for p in procs):
        sys.exit("the floor's decoding failed")
    return time.perf_counter() - t


def warm(paths: list[Path]) -> None:
    for path in paths:
        with open(path, "rb") as fh:
            while fh.read(16 << 20):
                pass


# -- the scaling table ------------------------------------------------------------------------------------------
def _lab_archive(args: tuple[Path, int]) -> Path:
    folder, i = args
    tar = folder / f"lab{i:03d}.tar"
    lab_tar(tar, True, RAW_MB, seed=100 + i)
    out = folder / "018_scale" / f"lab{i:03d}.tar.zst"
    subprocess.run(["pzstd", "-q", "-p", "1", "-3", str(tar), "-o", str(out)], check=True)
    tar.unlink()
    return out


def build_table(work: Path) -> list[Path]:
    (work / "018_scale").mkdir(parents=True)
    with ProcessPoolExecutor(CORES) as pool:
        return list(pool.map(_lab_archive, [(work, i) for i in range(ARCHIVES)]))


def table(work: Path, archives: list[Path]) -> None:
    comp = sum(a.stat().st_size for a in archives)
    print(f"{len(archives)} archives of {RAW_MB} MiB raw ({len(archives) * RAW_MB / 1024:.1f} GiB raw, "
          f"{comp / 2**30:.2f} GiB pzstd), {CORES} cores\n")  # fmt: skip
    names = [label for label, _ in vaults()]
    head = "".join(f"{n + ' s':>12}{'/floor':>8}{'x W=1':>7}" for n in names)
    print(f"{'W':>3}{'floor s':>9}{head}")
    first: dict[str, float] = {}
    for w in worker_counts():
        best = {"floor": min(floor(archives, w) for _ in range(REPEAT))}
        for label, path in vaults():
            db = work.parent / "db" / f"table.{label}.db"
            best[label] = min(vault_index(path, db, work, w) for _ in range(REPEAT))
            first.setdefault(label, best[label])
        cells = "".join(f"{best[n]:>12.2f}{best['floor'] / best[n]:>7.2f}x{first[n] / best[n]:>6.2f}x" for n in names)
        print(f"{w:>3}{best['floor']:>9.2f}{cells}", flush=True)
    for label, path in vaults():
        profile(f"table-{label}", path, work, work.parent / "db" / "profile.db")


# -- Slurm: the dry run's simulation against a task's code run over the whole mirror ------------------------------
TASK = """
import json, sys, time
from pathlib import Path
from cloudvault.index.secrets import SecretRules
from cloudvault.index.slurm import measure_task_rate
from cloudvault.tools.mirrorfs import open_mirror
from cloudvault.models import FileStat
root = sys.argv[1]
archives = [(root, st) for st in open_mirror(root).walk() if isinstance(st, FileStat) and st.path.endswith(".zst")]
rate, count, nbytes = measure_task_rate(archives, {root: SecretRules({})}, budget_s=1e9)
print(json.dumps({"rate": rate, "archives": count, "bytes": nbytes}))
"""


def slurm(work: Path) -> None:
    import json

    for label, path in vaults():
        env = {**os.environ, "PYTHONPATH": path}
        cmd = [sys.executable, "-m", "cloudvault", "--catalog", str(work.parent / "db" / "slurm.db"), "index",
               "--slurm", "4", "--dry-run", "--json", str(work)]  # fmt: skip
        doc = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd="/").stdout)
        full = json.loads(subprocess.run([sys.executable, "-c", TASK, str(work)], env=env, capture_output=True,
                                         text=True, check=True, cwd="/").stdout)  # fmt: skip
        sim = {row["tasks"]: row["seconds"] for row in doc["simulation"]}
        sample = doc["measured"]
        rows = ", ".join(f"{n} tasks {t:.1f} s" for n, t in sim.items())
        print(f"\nslurm dry run ({label}): sampled {sample['archives']} archives at "
              f"{sample['bytes_per_s'] / 1e9:.2f} GB/s; simulated {rows}")  # fmt: skip
        print(f"  one task's code over all {full['archives']} archives: {full['bytes'] / full['rate']:.1f} s "
              f"({full['rate'] / 1e9:.2f} GB/s; the simulation said {sim[1]:.1f} s)")  # fmt: skip


# -- one big archive -----------------------------------------------------------------------------------------
class _PoolReader:
    """size bytes read from a pool of data at an offset, round and round: a member's content without making it."""

    def __init__(self, pool: bytes, start: int, size: int) -> None:
        self._pool, self._at, self._left = memoryview(pool), start % len(pool), size

    def read(self, n: int) -> bytes:
        parts, n = [], min(n, self._left)
        self._left -= n
        while n:
            piece = self._pool[self._at : self._at + n]
            parts.append(piece)
            n -= len(piece)
            self._at = (self._at + len(piece)) % len(self._pool)
        return b"".join(parts)


def venv_sizes(rng: random.Random) -> list[int]:
    """Member sizes like a CUDA venv's: 90% small sources, 9% libraries of KBs to MBs, the rest in big ones."""
    target, sizes = BIG_MB << 20, []
    for _ in range(BIG_MEMBERS - BIG_MEMBERS // 100):
        small = rng.random() < 0.9
        sizes.append(int(rng.lognormvariate(8.5, 1.0)) if small else int(rng.lognormvariate(12.0, 1.5)))
    left = max(0, target - sum(sizes))
    big = [rng.random() ** 3 for _ in range(BIG_MEMBERS // 100)]
    sizes += [int(left * b / sum(big)) for b in big]
    rng.shuffle(sizes)
    return sizes


def build_big(work: Path) -> Path:
    rng = random.Random(27)
    text, binary = log_pool(rng, 8 << 20), fp16_like(rng, 128 << 20)
    tar_path, entry = work / "venv.tar", work / "big" / "021_venv"
    entry.mkdir(parents=True)
    with tarfile.open(tar_path, "w", format=tarfile.GNU_FORMAT) as tar:
        tar.copybufsize = 4 << 20
        for i, size in enumerate(venv_sizes(rng)):
            small = size < 64 << 10
            info = tarfile.TarInfo(f"venv/lib/python3.12/site-packages/pkg{i // 500:03d}/mod{i:06d}."
                                   + ("py" if small else "so"))  # fmt: skip
            info.size, info.mtime, info.mode = size, 1_760_000_000, 0o644
            pool = text if small else binary
            tar.addfile(info, _PoolReader(pool, rng.randrange(len(pool)), size))
    out = entry / "venv.tar.zst"
    subprocess.run(["pzstd", "-q", "-p", str(CORES), "-3", str(tar_path), "-o", str(out)], check=True)
    tar_path.unlink()
    return out


def catalog_rows(db: Path) -> tuple[list, list, list]:
    """What must not depend on --workers: the archive's hash, its frame table, its members as recorded."""
    conn = sqlite3.connect(db)
    try:
        archive = conn.execute("SELECT f.blake3, a.raw_size, a.member_count FROM archives a JOIN files f ON "
                               "f.id = a.file_id ORDER BY f.path").fetchall()  # fmt: skip
        frames = conn.execute("SELECT idx, comp_offset, comp_size, raw_offset, raw_size FROM frames ORDER BY "
                              "archive_id, idx").fetchall()  # fmt: skip
        members = conn.execute("SELECT path, type, size, header_offset, data_offset, blake3 FROM members "
                               "ORDER BY id").fetchall()  # fmt: skip
    finally:
        conn.close()
    return archive, frames, members


def big(work: Path, archive: Path) -> None:
    count = f"pzstd -q -dc -p {CORES} {archive} | wc -c"
    raw = subprocess.run(count, shell=True, capture_output=True, text=True, check=True)
    print(f"\none archive: {int(raw.stdout) / 2**30:.2f} GiB raw, {archive.stat().st_size / 2**30:.2f} GiB pzstd, "
          f"{BIG_MEMBERS} members; {CORES} cores")  # fmt: skip
    dc = f"pzstd -dc -p {CORES}"
    pz = min(timed(["sh", "-c", f"{dc} {archive} > /dev/null"]) for _ in range(REPEAT))
    zs = min(timed(["sh", "-c", f"zstd -q -dc {archive} > /dev/null"]) for _ in range(REPEAT))
    print(f"  {dc}: {pz:.2f} s   zstd -dc: {zs:.2f} s")
    for label, path in vaults():
        times, rows = {}, {}
        for w in (1, CORES):
            db = work / "db" / f"big.{label}.{w}.db"
            times[w] = min(vault_index(path, db, archive.parent.parent, w) for _ in range(REPEAT))
            rows[w] = catalog_rows(db)
        same = "equal" if rows[1] == rows[CORES] else "DIFFERENT"
        print(f"  {label}: --workers 1 {times[1]:.2f} s, --workers {CORES} {times[CORES]:.2f} s "
              f"({times[CORES] / pz:.2f}x {dc}); {len(rows[1][1])} frames, {len(rows[1][2])} members: catalogs "
              f"{same}")  # fmt: skip
        if same != "equal":
            sys.exit("the --workers 1 and --workers N catalogs differ")
        profile(f"big-{label}", path, archive.parent.parent, work / "db" / "profile.db")


def main() -> None:
    parts = os.environ.get("SCALE_PARTS", "table slurm big").split()
    work = Path(tempfile.mkdtemp(prefix="vault-bench-scale-"))
    (work / "db").mkdir()
    try:
        if "table" in parts or "slurm" in parts:
            t = time.perf_counter()
            archives = build_table(work / "table")
            print(f"built in {time.perf_counter() - t:.0f} s")
            warm(archives)
            if "table" in parts:
                table(work / "table", archives)
            if "slurm" in parts:
                slurm(work / "table")
            shutil.rmtree(work / "table")
        if "big" in parts:
            t = time.perf_counter()
            archive = build_big(work)
            print(f"\nbuilt the big archive in {time.perf_counter() - t:.0f} s")
            warm([archive])
            big(work, archive)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
