"""The index's worker pool, started in a process that runs other threads (vault as a library, a test process): a
worker forked while another thread holds one of SQLite's own locks (opening a file) waits on it for ever, as `vault
grep`'s once did (cloudvault/processes.py). The pool starts its workers from a fresh process then, and finds what one
process finds."""

from __future__ import annotations

import subprocess
import sys

INDEX_WHILE_A_THREAD_OPENS_SQLITE = """
import io, sqlite3, sys, tarfile, threading
from pathlib import Path
import zstandard
from cloudvault.cli.main import main

work = Path(sys.argv[1])
entry = work / "m/018_x/data"
entry.mkdir(parents=True)
for n in range(3):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(40):
            data = (b"%d-%d " % (n, i)) * (i * 20 + 1)
            info = tarfile.TarInfo(f"logs/{i:02d}.log")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (entry / f"a{n}.tar.zst").write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))

def rows(db):
    q = ("SELECT f.path, m.path, m.blake3 FROM members m JOIN archives a ON a.id = m.archive_id "
         "JOIN files f ON f.id = a.file_id")
    return sorted(sqlite3.connect(db).execute(q).fetchall())

def index(n, workers):
    db = work / f"c{n}.db"
    assert main(["--catalog", str(db), "index", "-q", "--workers", str(workers), str(work / "m")]) == 0
    return rows(db)

expected = index("one", 1)
stop = threading.Event()

def opens():  # a thread of the host process that opens and closes SQLite files all the while
    while not stop.is_set():
        sqlite3.connect(work / "scratch.db").close()

threading.Thread(target=opens, daemon=True).start()
assert len(expected) == 120 and threading.active_count() == 2
for turn in range(30):
    assert index(turn, 2) == expected
stop.set()
print("done")
"""


def test_the_pool_starts_safely_in_a_process_whose_other_thread_is_inside_sqlite(tmp_path):
    done = subprocess.run([sys.executable, "-c", INDEX_WHILE_A_THREAD_OPENS_SQLITE, str(tmp_path)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-2000:]
