"""`vault index` against `zstd -dc > /dev/null`, whole processes in one run: `python bench/index.py`.

Builds in a temp folder, of BENCH_MB (default 1024) MiB raw each: a lab-like archive (fp16-like dumps, logs and
json the secret scanner reads; about 4x compressible) as one frame (`zstd -T0`) and as pzstd frames; a barely
compressible pzstd archive; and an archive of BENCH_SMALL (default 200000, scaled with BENCH_MB) small logs and
json files. Prints for each `vault index` time (default workers: one archive, on all the machine's cores), peak
RSS and the ratio zstd time / vault time (above 1 is faster than zstd; BENCH_REPEAT=3 takes the best of three
turns, for a busy machine), then `vault extract`
of a small member against the import floor `python -c "import sqlite3, zstandard, blake3"`. VAULT names the
vaults to run, space-separated (default: `vault` on PATH; a plain `pip install .` venv measures what users get;
two venvs compare before and after in one run).
"""

from __future__ import annotations

import io
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

RAW_MB = int(os.environ.get("BENCH_MB", "1024"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "1"))
SMALL = int(os.environ.get("BENCH_SMALL", str(200_000 * min(RAW_MB, 1024) // 1024)))
WORDS = b"step loss lr accept_len phase verify draft token batch rank grad_norm epoch eval ok warn".split()


def log_pool(rng: random.Random, size: int = 4 << 20) -> bytes:
    """Varied log lines (compress like real training logs); files are slices of this pool."""
    lines, n = [], 0
    while n < size:
        words = b" ".join(rng.choice(WORDS) + b"=" + str(rng.randint(0, 99999)).encode() for _ in range(6))
        line = b"2026-05-%02d %02d:%02d:%02d INFO " % (rng.randint(1, 28), *rng.choices(range(60), k=3)) + words
        lines.append(line + b"\n")
        n += len(lines[-1])
    return b"".join(lines)


LOW = bytes(b & 0xF0 for b in range(256))  # mantissas of quantised values: the low bits are zero
HIGH = bytes(0x38 | (b & 0x03) for b in range(256))  # sign and exponent: activations cluster in a narrow range


def fp16_like(rng: random.Random, size: int) -> bytes:
    """Half-precision activations after a ReLU: half the 1 KiB runs zero, the rest quantised clustered values."""
    out = bytearray(rng.randbytes(size).translate(LOW))
    out[1::2] = rng.randbytes(size // 2).translate(HIGH)
    zero = bytes(1024)
    for at in range(0, size, 2048):
        out[at : at + 1024] = zero
    return bytes(out)


def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 1_760_000_000, 0o644
    tar.addfile(info, io.BytesIO(data))


def lab_tar(path: Path, compressible: bool, raw_mb: int = RAW_MB, seed: int = 9) -> None:
    """Dumps interleaved with logs and json, as a run folder is; with compressible False the dumps are random."""
    rng, target, written, i = random.Random(seed), raw_mb << 20, 0, 0
    pool = log_pool(rng)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        while written < target:
            run = f"runs/run{i // 16:03d}"
            if i % 3 == 0:
                size = 8 << 20
                data = fp16_like(rng, size) if compressible else rng.randbytes(size)
                add(tar, f"{run}/activations_{i:05d}.bin", data)
            elif i % 3 == 1:
                start = rng.randrange(len(pool) - (2 << 20))
                data = pool[start : start + rng.randint(1 << 20, 2 << 20)]
                add(tar, f"{run}/train_{i:05d}.log", data)
            else:
                data = b'{"step": %d, "metrics": {"loss": %f}, "tags": ["a", "b"]}\n' % (i, rng.random()) * 2000
                add(tar, f"{run}/metrics_{i:05d}.json", data)
            written += len(data)
            i += 1


def small_tar(path: Path) -> None:
    rng = random.Random(11)
    pool = log_pool(rng, 1 << 20)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(SMALL):
            start = rng.randrange(len(pool) - 4096)
            data = pool[start : start + rng.randint(100, 4000)]
            add(tar, f"logs/{i // 1000:03d}/rank{i:06d}.{'log' if i % 2 else 'json'}", data)


def lab_mirror(work: Path) -> Path:
    """One mirror, one entry (018_bench), three archives: lab data as one zstd frame and as pzstd frames, and many
    small members (bench/mount.py and bench/grep.py read it)."""
    entry = work / "mirror" / "018_bench"
    entry.mkdir(parents=True)
    lab = work / "lab.tar"
    lab_tar(lab, True)
    subprocess.run(["zstd", "-q", "-T0", "-3", str(lab), "-o", str(entry / "lab_one_frame.tar.zst")], check=True)
    subprocess.run(["pzstd", "-q", "-p", "2", "-3", str(lab), "-o", str(entry / "lab_pzstd.tar.zst")], check=True)
    lab.unlink()
    small = work / "small.tar"
    small_tar(small)
    subprocess.run(["zstd", "-q", "-T0", "-3", str(small), "-o", str(entry / "small_members.tar.zst")], check=True)
    small.unlink()
    return work / "mirror"


def measure(cmd: list[str]) -> tuple[float, int]:
    """Seconds and peak RSS (MiB) of one whole process, through GNU time."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", *cmd], capture_output=True, text=True)
    if out.returncode not in (0, 5):
        sys.exit(f"{cmd[0]} failed: {out.stderr[-2000:]}")
    secs, kb = out.stderr.strip().splitlines()[-1].split()
    return float(secs), int(kb) // 1024


def build(work: Path) -> list[Path]:
    made = []
    for name, maker, how in (
        ("lab_one_frame", lambda p: lab_tar(p, True), ["zstd", "-q", "-T0", "-3"]),
        ("lab_pzstd", None, ["pzstd", "-q", "-p", "2", "-3"]),
        ("random_pzstd", lambda p: lab_tar(p, False), ["pzstd", "-q", "-p", "2", "-3"]),
        ("small_members", small_tar, ["zstd", "-q", "-T0", "-3"]),
    ):
        tar = work / ("lab.tar" if name.startswith("lab") else f"{name}.tar")  # pzstd compresses the same tar
        if maker is not None:
            maker(tar)
        entry = work / name / "018_bench"
        entry.mkdir(parents=True)
        subprocess.run([*how, str(tar), "-o", str(entry / f"{name}.tar.zst")], check=True)
        made.append(entry / f"{name}.tar.zst")
        if name != "lab_one_frame":
            tar.unlink()
    return made


def index_table(vaults: list[str], work: Path, archives: list[Path]) -> None:
    """One row per archive and vault. zstd and the vaults take turns, BENCH_REPEAT times (default 1), and the
    best time of each is shown: on a busy machine the turns see the same load."""
    print(
        f"{'archive':<22}{'raw MiB':>8}{'comp':>6}{'zstd -dc':>10}{'vault':>8}{'RSS MiB':>9}{'zstd/vault':>11}  vault"
    )
    for archive in archives:
        raw = tar_size(archive)
        best: dict[str, tuple[float, int]] = {}
        for _turn in range(REPEAT):
            runs = [("zstd", ["zstd", "-q", "-d", "-c", "-o", "/dev/null", str(archive)])]
            for n, vault in enumerate(vaults):
                db = work / f"{archive.stem}.{n}.db"
                Path(db).unlink(missing_ok=True)  # every turn indexes from scratch
                runs.append((vault, [vault, "--catalog", str(db), "index", "-q", str(archive.parent.parent)]))
            for name, cmd in runs:
                took = measure(cmd)
                best[name] = min(best.get(name, took), took)
        zstd_s = best["zstd"][0]
        for vault in vaults:
            vault_s, rss = best[vault]
            print(f"{archive.name:<22}{raw >> 20:>8}{raw / archive.stat().st_size:>5.1f}x{zstd_s:>9.2f}s"
                  f"{vault_s:>7.2f}s{rss:>9}{zstd_s / vault_s:>10.2f}x  {vault}")  # fmt: skip


def tar_size(archive: Path) -> int:
    out = subprocess.run(f"zstd -q -dc {archive} | wc -c", shell=True, capture_output=True, text=True, check=True)
    return int(out.stdout)


def median_time(cmd: list[str], runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return sorted(times)[runs // 2]


def extract_startup(vault: str, n: int, work: Path, archive: Path) -> None:
    """A small member near the end of the multi-frame archive: vault extract against the import floor."""
    import sqlite3

    db = work / f"{archive.stem}.{n}.db"
    member = (
        sqlite3.connect(db)
        .execute("SELECT path FROM members WHERE type = 'file' AND size < 200000 ORDER BY data_offset DESC LIMIT 1")
        .fetchone()[0]
    )
    out = work / "out"
    out.mkdir(exist_ok=True)
    python = str(Path(vault).with_name("python3")) if os.sep in vault else sys.executable
    floor = median_time([python, "-c", "import sqlite3, zstandard, blake3"])
    vault_s = median_time([vault, "--catalog", str(db), "extract", "018", member, "-o", str(out), "--force"])
    tar_s = median_time(["tar", "-I", "zstd", "-C", str(out), "-xf", str(archive), member], runs=1)
    print(
        f"\nvault extract (small member, multi-frame): {vault_s * 1000:.0f} ms; import floor {floor * 1000:.0f} ms "
        f"({vault_s / floor:.2f}x the floor); tar -I zstd -xf {tar_s * 1000:.0f} ms ({tar_s / vault_s:.0f}x slower)"
    )


def whole_mirror(vault: str, work: Path, archives: list[Path]) -> None:
    """The four archives as one mirror (hard links): --workers 1 against the default (two processes)."""
    entry = work / "all" / "018_bench"
    entry.mkdir(parents=True, exist_ok=True)
    for archive in archives:
        if not (entry / archive.name).exists():
            os.link(archive, entry / archive.name)
    times = {}
    for workers in ("1", "2"):
        db = work / f"all.{workers}.db"
        db.unlink(missing_ok=True)
        times[workers] = measure([vault, "--catalog", str(db), "index", "-q", "--workers", workers, str(entry.parent)])
    print(f"whole mirror of {len(archives)} archives: --workers 1 {times['1'][0]:.2f}s, --workers 2 "
          f"{times['2'][0]:.2f}s ({times['1'][0] / times['2'][0]:.2f}x; peak RSS {times['2'][1]} MiB)  {vault}")


def main() -> None:
    vaults = os.environ.get("VAULT", "").split() or [shutil.which("vault") or sys.exit("pip install . first")]
    work = Path(tempfile.mkdtemp(prefix="vault-bench-index-"))
    try:
        t = time.perf_counter()
        archives = build(work)
        load = os.getloadavg()[0]
        print(f"built {len(archives)} archives of ~{RAW_MB} MiB raw in {time.perf_counter() - t:.0f} s "
              f"({SMALL} small members); {os.cpu_count()} cores, load {load:.1f}\n")  # fmt: skip
        index_table(vaults, work, archives)
        print()
        for vault in vaults:
            whole_mirror(vault, work, archives)
        for n, vault in enumerate(vaults):
            extract_startup(vault, n, work, archives[1])
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
