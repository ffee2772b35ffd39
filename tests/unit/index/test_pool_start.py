"""The index's worker pool forks its workers (index/archives.py `_read_archives_pool`: they inherit the blocked
stopping signals and the budget). A fork is safe only where the forking process runs no other thread: a child forked
while another thread holds a lock (one of SQLite's own, a logging handler's) waits on it for ever, as `vault grep`'s
workers once did (cloudvault/processes.py). This guards that the index starts its pool with one thread running."""

from __future__ import annotations

import subprocess
import tarfile
import threading

from conftest import require

from cloudvault.cli.main import main
from cloudvault.index import archives


def test_the_pool_forks_its_workers_from_a_process_running_one_thread(tmp_path, monkeypatch):
    entry = tmp_path / "m/018_x"
    (entry / "data").mkdir(parents=True)
    for n in range(3):
        src = tmp_path / f"a{n}.tar"
        with tarfile.open(src, "w", format=tarfile.GNU_FORMAT) as tar:
            for i in range(50):
                (tmp_path / "f").write_bytes(b"z" * (i * 100 + n))
                tar.add(tmp_path / "f", arcname=f"logs/{i:02d}.log")
        subprocess.run([require("zstd"), "-q", str(src), "-o", str(entry / f"data/a{n}.tar.zst")], check=True)
    for i in range(20):  # plain files: hashed before the archives are read
        (entry / f"notes{i}.txt").write_text(f"note {i}\n" * 1000)
    threads_at_start = []
    pool = archives._read_archives_pool

    def counted(*args, **kwargs):
        threads_at_start.append([t.name for t in threading.enumerate()])
        return pool(*args, **kwargs)

    monkeypatch.setattr(archives, "_read_archives_pool", counted)
    for extra in ([], ["--optimize"]):
        catalog = tmp_path / f"c{len(extra)}.db"
        assert main(["--catalog", str(catalog), "index", "-q", "--workers", "2", *extra, str(tmp_path / "m")]) == 0
    assert len(threads_at_start) == 2
    assert threads_at_start == [["MainThread"], ["MainThread"]]
