"""`vault mount` against ratarmount (1.3, from PyPI) on the ~1 GB archives bench/index.py builds: one run,
`python bench/mount.py`, figures side by side with their ratios (ratarmount / vault: above 1, vault is faster).

Measures, each mount in the foreground as its own process: the time from the command to a mounted, listed tree
(vault reads the catalog it already has; ratarmount builds its index, a full decode, unless one exists: both its
first and its second mount are timed), the first byte of each archive's last member, `cat` of one 1-2 MiB member
deep in the pzstd archive, `grep -r` over every member of an archive (and `zstd -dc | tar -xO | grep`, the
floor), and each mount process's peak RSS. RATARMOUNT names its command (default: `ratarmount` on PATH; install
it into a venv of its own: `python -m venv /tmp/rm && /tmp/rm/bin/pip install ratarmount==1.3.0`). BENCH_MB
(default 1024) sizes the archives. Mounts are FUSE: needs fuse3 and /dev/fuse.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from index import RAW_MB, lab_mirror  # noqa: E402  (bench/index.py's archives, made the same way)

NEEDLE = "xyzzy-not-in-any-member"
MOUNTED = "mounted, ratarmount's index made before"


def mounted(point: Path) -> bool:
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return any(line.split()[4] == str(point) for line in fh)


class Mount:
    """One foreground mount process: started, timed to its first listing, its peak RSS read before unmount."""

    def __init__(self, cmd: list[str], point: Path, probe: Path, env: dict | None = None) -> None:
        point.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        while not (mounted(point) and probe.exists()):
            if self.proc.poll() is not None:
                sys.exit(f"{cmd[0]} failed: {self.proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.01)
        self.seconds = time.perf_counter() - t
        self.point = point

    def peak_rss_mib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            return next(int(line.split()[1]) // 1024 for line in fh if line.startswith("VmHWM"))

    def close(self) -> None:
        subprocess.run(["fusermount3", "-u", "-z", str(self.point)], check=False)
        self.proc.wait(timeout=60)


def timed(cmd: list[str] | str) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, shell=isinstance(cmd, str), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def members(archive: Path) -> list[tuple[str, int]]:
    out = subprocess.run(["tar", "--zstd", "-tvf", str(archive)], capture_output=True, text=True, check=True)
    rows = [line.split(None, 5) for line in out.stdout.splitlines() if line.startswith("-")]
    return [(r[5], int(r[2])) for r in rows]


def reads(top: Path, mirror: Path) -> dict[str, float]:
    """The read figures over one mounted tree (archives as folders under top/018_bench)."""
    entry, figures = mirror / "018_bench", {}
    for archive in sorted(entry.glob("*.tar.zst")):
        last = members(archive)[-1][0]
        where = str(top / archive.name / last)
        figures[f"first byte of the last member, {archive.name}"] = timed(["head", "-c", "1", where])
    pz = entry / "lab_pzstd.tar.zst"
    logs = [name for name, size in members(pz) if name.endswith(".log") and size >= 1 << 20]
    deep = logs[len(logs) * 3 // 4]
    figures[f"cat of a {deep.rsplit('/', 1)[-1]} 3/4 into lab_pzstd"] = timed(["cat", str(top / pz.name / deep)])
    for name in ("lab_pzstd.tar.zst", "small_members.tar.zst"):
        figures[f"grep -r over every member of {name}"] = timed(["grep", "-r", NEEDLE, str(top / name)])
    return figures


def main() -> None:
    ratarmount = os.environ.get("RATARMOUNT") or shutil.which("ratarmount") or sys.exit("install ratarmount 1.3")
    tree = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    vault = [sys.executable, "-m", "cloudvault"]
    work = Path(tempfile.mkdtemp(prefix="vault-bench-mount-"))
    try:
        t = time.perf_counter()
        mirror = lab_mirror(work)
        print(f"built 3 archives of ~{RAW_MB} MiB raw in {time.perf_counter() - t:.0f} s; {os.cpu_count()} cores, "
              f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
        db = work / "catalog.db"
        t = time.perf_counter()
        subprocess.run([*vault, "--catalog", str(db), "index", "-q", str(mirror)], check=True, env=env)
        print(f"vault index (once, before any mount): {time.perf_counter() - t:.1f} s\n")
        floors = {name: timed(f"zstd -dc {mirror}/018_bench/{name} | tar -xO | grep -c {NEEDLE}")
                  for name in ("lab_pzstd.tar.zst", "small_members.tar.zst")}  # fmt: skip
        results: dict[str, dict[str, float]] = {}
        rss: dict[str, int] = {}
        probe = "018_bench/lab_pzstd.tar.zst/runs"
        vcmd = [*vault, "--catalog", str(db), "mount", "--foreground", str(work / "v")]
        v = Mount(vcmd, work / "v", work / "v" / mirror.name / probe, env)
        results["vault"] = {MOUNTED: v.seconds, **reads(work / "v" / mirror.name / "018_bench", mirror)}
        rss["vault"] = v.peak_rss_mib()
        v.close()
        rcmd = [ratarmount, "-f", "--recursive", "--index-folders", str(work / "ridx"), str(mirror), str(work / "r")]
        (work / "ridx").mkdir()
        r = Mount(rcmd, work / "r", work / "r" / probe)
        first = r.seconds
        r.close()
        r = Mount(rcmd, work / "r", work / "r" / probe)
        results["ratarmount"] = {MOUNTED: r.seconds, **reads(work / "r" / "018_bench", mirror)}
        rss["ratarmount"] = r.peak_rss_mib()
        r.close()
        report(results, rss, floors, first)
    finally:
        for point in ("v", "r"):
            if mounted(work / point):
                subprocess.run(["fusermount3", "-u", "-z", str(work / point)], check=False)
        shutil.rmtree(work, ignore_errors=True)


def report(results: dict, rss: dict, floors: dict, first_mount: float) -> None:
    width = max(len(k) for k in results["vault"])
    print(f"{'':{width}}  {'vault':>9}  {'ratarmount':>10}  ratio (ratarmount / vault)")
    vault_mount = results["vault"][MOUNTED]
    print(f"{'mounted, ratarmount building its index':{width}}  {vault_mount:8.3f}s  {first_mount:9.3f}s  "
          f"{first_mount / vault_mount:5.2f}x")  # fmt: skip
    for key, secs in results["vault"].items():
        other = results["ratarmount"][key]
        print(f"{key:{width}}  {secs:8.3f}s  {other:9.3f}s  {other / secs:5.2f}x")
    print(f"{'peak RSS of the mount process':{width}}  {rss['vault']:6d} MiB  {rss['ratarmount']:7d} MiB  "
          f"{rss['ratarmount'] / rss['vault']:5.2f}x")  # fmt: skip
    for name, floor in floors.items():
        secs = results["vault"][f"grep -r over every member of {name}"]
        print(f"zstd -dc {name} | tar -xO | grep: {floor:.3f}s; vault's grep -r is {secs / floor:.2f}x of it")


if __name__ == "__main__":
    main()
