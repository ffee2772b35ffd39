"""`vault mount` against ratarmount (1.3, from PyPI) on the archives bench/index.py builds: `python bench/mount.py`,
figures side by side with their ratios (ratarmount / vault: at or above 1.0, vault is as fast or faster).

Runs what is installed, never the source tree: the `vault` beside this Python (a plain `pip install .` venv measures
what users get), or VAULT, space-separated vault commands (two venvs compare before and after in one run). The
ratarmount beside this Python, or RATARMOUNT, or `ratarmount` on PATH; one venv holds both:
`python3 -m venv /tmp/b && /tmp/b/bin/pip install . ratarmount==1.3.0 && /tmp/b/bin/python bench/mount.py`.

Measures, each mount in the foreground as its own process: the time from the command to a mounted, listed tree
(vault reads the catalog it already has; ratarmount builds its index, a full decode, on its first mount and reuses
it after), the first byte of each archive's last member, `cat` of one 1-2 MiB member 3/4 into the pzstd archive,
`grep -r` over every member of an archive (and the floor `zstd -dc | tar -xO | grep`), and each mount process's
peak RSS. The tools take turns (vault A, vault B, ..., ratarmount, floor; BENCH_REPEAT turns, default 3) and the
medians are shown, with each figure's spread over the turns (how noisy the machine was). BENCH_MB (default 1024)
sizes the archives; BENCH_ROWS (comma-separated words) keeps only the rows naming one of them; BENCH_WORK keeps
the mirror, catalog and ratarmount's index in that folder for the next run.
Mounts are FUSE: needs fuse3 and /dev/fuse.
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

sys.path.insert(0, str(Path(__file__).parent))
from index import RAW_MB, lab_mirror  # noqa: E402  (bench/index.py's archives, made the same way)

NEEDLE = "xyzzy-not-in-any-member"
MOUNTED = "mounted and listed"
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
PROBE = "018_bench/lab_pzstd.tar.zst/runs"
GREPPED = ("lab_pzstd.tar.zst", "small_members.tar.zst")
ROWS = [w for w in os.environ.get("BENCH_ROWS", "").split(",") if w]
CACHE_MB = 256  # vault mount's default --cache-mb: the RSS budget's part that grows with the cache


def installed(name: str) -> str | None:
    """name's command beside this Python (its venv), else on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def mounted(point: Path) -> bool:
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return any(line.split()[4] == str(point) for line in fh)


class Mount:
    """One foreground mount process: started, timed to its first listing, its peak RSS read before unmount."""

    def __init__(self, cmd: list[str], point: Path, probe: Path) -> None:
        point.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
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


def targets(entry: Path) -> dict[str, list[str]]:
    """What each read row reads, relative to the mounted entry folder: a command line of paths."""
    rows = {}
    for archive in sorted(entry.glob("*.tar.zst")):
        rows[f"first byte of the last member, {archive.stem}"] = ["head", "-c", "1", f"{archive.name}/"
                                                                  f"{members(archive)[-1][0]}"]  # fmt: skip
    pz = entry / "lab_pzstd.tar.zst"
    logs = [name for name, size in members(pz) if name.endswith(".log") and size >= 1 << 20]
    rows["cat of a 1-2 MiB member 3/4 into lab_pzstd"] = ["cat", f"{pz.name}/{logs[len(logs) * 3 // 4]}"]
    for name in GREPPED:
        rows[f"grep -r over every member of {name.split('.')[0]}"] = ["grep", "-r", NEEDLE, name]
    return {key: cmd for key, cmd in rows.items() if not ROWS or any(word in key for word in ROWS)}


def reads(top: Path, rows: dict[str, list[str]]) -> dict[str, float]:
    """Each row's seconds over one mounted entry folder (top), a fresh mount: no page cache of its own yet."""
    return {key: timed([cmd[0], *cmd[1:-1], str(top / cmd[-1])]) for key, cmd in rows.items()}


def turn(tools: dict[str, tuple[list[str], str]], work: Path, mirror: Path, rows: dict) -> dict[str, dict]:
    """One mount of every tool in turn, and the floors: {tool: {row: seconds}}. A tool is its command and where
    the mirror's folder is under its mount point."""
    out = {}
    for name, (cmd, top) in tools.items():
        point = work / f"point-{len(out)}"
        m = Mount([*cmd, str(point)], point, point / top / PROBE)
        out[name] = {MOUNTED: m.seconds, **reads(point / top / "018_bench", rows)}
        out[name]["peak RSS MiB"] = m.peak_rss_mib()
        m.close()
    floor, entry = "zstd -dc {} | tar -xO | grep -c " + NEEDLE, mirror / "018_bench"
    grepped = {f"grep -r over every member of {n.split('.')[0]}": n for n in GREPPED}
    out["floor"] = {key: timed(floor.format(entry / n)) for key, n in grepped.items() if key in rows}
    return out


def built_by(vault: str) -> str:
    """Which install indexed a catalog kept in BENCH_WORK: the vault script's real path and the time it was
    installed. A catalog made by another install (an older vault: piece BLOBs without the first parts) reads
    differently, so each vault reuses only the catalog it made."""
    script = shutil.which(vault) or vault
    return f"{os.path.realpath(script)} {os.stat(script).st_mtime_ns}\n"


def prepare(work: Path, vaults: list[str], ratarmount: list[str]) -> tuple[Path, list[Path], float]:
    """The mirror, each vault's catalog of it (its own: a newer vault would migrate a shared one out of an older's
    reach) and ratarmount's index in work (made once); ratarmount's first mount's seconds."""
    mirror, dbs = work / "mirror", [work / f"catalog{i}.db" for i in range(len(vaults))]
    if not mirror.exists():
        t = time.perf_counter()
        lab_mirror(work)
        print(f"built 3 archives of ~{RAW_MB} MiB raw in {time.perf_counter() - t:.0f} s")
    for vault, db in zip(vaults, dbs, strict=True):
        marker = db.with_name(db.name + ".built-by")
        if db.exists() and (not marker.exists() or marker.read_text() != built_by(vault)):
            for old in work.glob(db.name + "*"):  # the catalog, its -wal and -shm, its marker
                old.unlink()
        if not db.exists():
            subprocess.run([vault, "--catalog", str(db), "index", "-q", str(mirror)], check=True)
            marker.write_text(built_by(vault))
    (work / "ridx").mkdir(exist_ok=True)
    m = Mount([*ratarmount, str(work / "point-r")], work / "point-r", work / "point-r" / PROBE)
    m.close()
    return mirror, dbs, m.seconds


def main() -> None:
    vaults = os.environ.get("VAULT", "").split() or [installed("vault")]
    if None in vaults:
        sys.exit(f"no vault: {sys.executable} -m pip install . (from the tree), or VAULT=...")
    rat = os.environ.get("RATARMOUNT") or installed("ratarmount")
    if rat is None:
        sys.exit(f"no ratarmount: {sys.executable} -m pip install ratarmount==1.3.0 (PyPI), then run this again")
    keep = os.environ.get("BENCH_WORK")
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="vault-bench-mount-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        ratarmount = [rat, "-f", "--recursive", "--index-folders", str(work / "ridx"), str(work / "mirror")]
        mirror, dbs, first = prepare(work, vaults, ratarmount)
        tools = {v: ([v, "--catalog", str(db), "mount", "--foreground"], mirror.name)
                 for v, db in zip(vaults, dbs, strict=True)}  # fmt: skip
        tools["ratarmount"] = (ratarmount, "")
        rows = targets(mirror / "018_bench")
        print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {REPEAT} turns, medians (spread min-max)")
        turns = [turn(tools, work, mirror, rows) for _ in range(REPEAT)]
        report(turns, vaults, first)
        print(f"load after: {os.getloadavg()[0]:.1f}")
    finally:
        for point in work.glob("point-*"):
            if mounted(point):
                subprocess.run(["fusermount3", "-u", "-z", str(point)], check=False)
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def report(turns: list[dict], vaults: list[str], first_mount: float) -> None:
    """Per row: each vault's median, ratarmount's, and ratarmount / vault; then each vault's grep against the floor."""

    def med(tool: str, row: str) -> tuple[float, str]:
        got = [t[tool][row] for t in turns]
        if row != "peak RSS MiB" and max(got) < 0.1:  # milliseconds: three decimals of a second would hide them
            return statistics.median(got), f"{min(got) * 1e3:.2f}-{max(got) * 1e3:.2f}ms"
        return statistics.median(got), f"{min(got):.3g}-{max(got):.3g}"

    def cell(tool: str, row: str) -> str:
        secs, spread = med(tool, row)
        return f"{secs * 1e3:7.2f}ms ({spread})" if spread.endswith("ms") else f"{secs:9.3f} ({spread})"

    names = [f"vault{n}" if len(vaults) > 1 else "vault" for n in range(len(vaults))]
    for name, v in zip(names, vaults, strict=True):
        print(f"{name}: {v}")
    rows = list(turns[0][vaults[0]])
    width = max(len(r) for r in rows)
    print(f"{'':{width}}  " + "".join(f"{n:>30}" for n in [*names, "ratarmount"]) + "  ratio ratarmount / vault")
    print(f"{'ratarmount first mount (builds its index)':{width}}  {first_mount:.3f}s")
    for row in rows:
        other = med("ratarmount", row)[0]
        cells = [cell(v, row) for v in vaults]
        ratios = [f"{other / med(v, row)[0]:5.2f}x" for v in vaults]
        print(f"{row:{width}}  " + "".join(f"{c:>30}" for c in [*cells, cell("ratarmount", row)])
              + "  " + " ".join(ratios))  # fmt: skip
    print(f"peak RSS budget: --cache-mb {CACHE_MB} plus a constant (docs/performance.md)")
    for row in turns[0]["floor"]:
        floor, spread = med("floor", row)
        ours = " ".join(f"{med(v, row)[0] / floor:.2f}x" for v in vaults)
        print(f"floor `zstd -dc | tar -xO | grep` for {row}: {floor:.3f}s ({spread}); vault / floor: {ours}")


if __name__ == "__main__":
    main()
