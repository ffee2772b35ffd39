"""`vault index --slurm`: a plan of bin-packed tasks, shards that workers fill without the catalog, and a merge
that leaves the catalog as a local index would, without Slurm (the tests with a real Slurm are
tests/integration/test_index_slurm.py)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from archives import compress, gnu_tar, make_tree
from conftest import require

from cloudvault.index.slurm import Layout, make_plan, pack, plan_archives, plan_hash, root_docs, simulate, write_json

SHAPES = ("zstd", "pzstd", "python", "zstd-T0", "pzstd")


def _mirror(base: Path) -> Path:
    """Five archives of several shapes (one frame, pzstd frames, Python's 1 MiB frames), each with a listing,
    plus plain files and a doc: small, but every table of the catalog gets rows."""
    require("zstd")
    require("pzstd")
    root = base / "Marvell_cloud"
    for i, how in enumerate(SHAPES):
        src = base / f"src{i}"
        make_tree(src, big=(i + 1) << 19, non_utf8=i % 2 == 0, long_names=i != 3)
        entry = root / f"0{18 + i % 3}_e{i}" / "data"
        entry.mkdir(parents=True, exist_ok=True)
        gnu_tar(src, base / f"a{i}.tar", "pax" if i == 2 else "gnu")
        archive = compress(base / f"a{i}.tar", entry / f"part{i}.tar.zst", how)
        listing = subprocess.run(["tar", "-tf", str(base / f"a{i}.tar")], capture_output=True, check=True).stdout
        Path(str(archive) + ".list").write_bytes(listing if i != 4 else listing + b"./not_there.txt\n")
        (entry.parent / "ENVIRONMENT.md").write_text(f"# entry {i}\nnode n8{i}\n")
    (root / "README.md").write_text("top level\n")
    return root


def catalog_rows(db: Path) -> dict[str, list]:
    """Every row that indexing writes, ids and timestamps left out, joined to the file path they belong to."""
    c = sqlite3.connect(db)
    q = {
        "mirrors": "SELECT name, root, manifest FROM mirrors ORDER BY name",
        "entries": "SELECT entry_id, what, node_gpu, measured, size_text, key_files, caution, settings, present "
        "FROM entries ORDER BY entry_id",
        "files": "SELECT path, raw_path, entry_id, kind, size, mtime_ns, ctime_ns, inode, mode, link_target, blake3 "
        "FROM files ORDER BY path",
        "archives": "SELECT f.path, a.status, a.raw_size, a.member_count, a.frame_count, a.list_status FROM archives a "
        "JOIN files f ON f.id = a.file_id ORDER BY 1",
        "frames": "SELECT f.path, r.idx, r.comp_offset, r.comp_size, r.raw_offset, r.raw_size FROM frames r "
        "JOIN archives a ON a.id = r.archive_id JOIN files f ON f.id = a.file_id ORDER BY 1, 2",
        "members": "SELECT f.path, m.path, m.raw_path, m.type, m.size, m.mode, m.mtime, m.uid, m.gid, m.uname, "
        "m.gname, m.link_target, m.header_offset, m.data_offset, m.blake3 FROM members m "
        "JOIN archives a ON a.id = m.archive_id JOIN files f ON f.id = a.file_id ORDER BY 1, m.header_offset",
        "flags": "SELECT l.entry_id, f.path, l.member, l.kind, l.detail FROM flags l LEFT JOIN files f "
        "ON f.id = l.file_id ORDER BY 1, 2, 3, 4, 5",
        "docs": "SELECT f.path, d.body FROM docs d JOIN files f ON f.id = d.file_id ORDER BY 1",
    }
    return {table: c.execute(sql).fetchall() for table, sql in q.items()}


def _local_catalog(vault, mirror: Path, db: Path) -> dict[str, list]:
    r = vault("--catalog", str(db), "index", "--json", str(mirror))
    assert r.code == 5, r.err  # 5: the listings that name paths not in their archives
    return {**catalog_rows(db), "flag counts": json.loads(r.out)["flags"]}


def _rows(local: dict) -> dict:
    return {k: v for k, v in local.items() if k != "flag counts"}


def _write_plan(db: Path, mirror: Path, tasks: int) -> dict:
    """The plan `vault index --slurm N` writes, made here without Slurm."""
    from cloudvault.catalog.db import open_catalog
    from cloudvault.index.roots import roots_to_index

    conn = open_catalog(db, create=True)
    mroots = roots_to_index(conn, [str(mirror)], None)
    conn.close()
    to_read, _ = plan_archives(mroots, {})
    plan = make_plan(db, root_docs(mroots), to_read, tasks, None)
    Layout(db).folder.joinpath("shards").mkdir(parents=True, exist_ok=True)
    write_json(Layout(db).plan, plan)
    return plan


def _run_tasks(db: Path, plan: dict, env: dict | None = None) -> None:
    """Each task as Slurm would run it: its own process, never told where the catalog is."""
    for task in range(len(plan["tasks"])):
        done = subprocess.run([sys.executable, "-m", "cloudvault.index.slurm_task", str(Layout(db).plan), str(task)],
                              capture_output=True, text=True, env={**os.environ, **(env or {})})  # fmt: skip
        assert done.returncode == 0, done.stderr


# -- the plan, on paper -------------------------------------------------------------------------------------
def test_plan_packs_largest_first_into_the_lightest_task_and_is_deterministic(tmp_path):
    assert pack([5, 1, 9, 3, 3, 8], 3) == [[2], [5, 4], [0, 3, 1]]  # 9; 8+3; 5+3+1
    assert pack([4, 4], 5) == [[0], [1]]  # never an empty task
    root = {"root": "/m", "name": "m", "secrets": {}}
    from cloudvault.models import FileStat

    stats = [("/m", FileStat(f"e/{n}.tar.zst", None, "file", size, 1, 2, n, 0o644)) for n, size in enumerate([7, 2, 5])]
    one = make_plan(tmp_path / "c.db", [root], stats, 2, None)
    two = make_plan(tmp_path / "c.db", [root], list(reversed(stats)), 2, None)
    assert one == two and one["hash"] == plan_hash(one)
    assert [t["bytes"] for t in one["tasks"]] == [7, 7]
    changed = make_plan(tmp_path / "c.db", [root], stats[:2], 2, None)
    assert changed["hash"] != one["hash"]


def test_simulated_wall_time_stops_falling_at_the_filesystem_bandwidth():
    assert simulate([100], 10, None) == pytest.approx(10)
    assert simulate([50, 50], 10, None) == pytest.approx(5)
    # 4 tasks at 10 B/s want 40 B/s; the filesystem gives 20: half the speed each
    assert simulate([50] * 4, 10, 20) == pytest.approx(10)
    assert simulate([50] * 8, 10, 20) == pytest.approx(simulate([100] * 4, 10, 20))
    # a task that ends leaves its share to the others
    assert simulate([10, 30], 10, 10) == pytest.approx(2 + 2)


def test_dry_run_prints_the_plan_scripts_and_simulation_and_submits_nothing(tmp_path, vault):
    mirror = _mirror(tmp_path)
    db = tmp_path / "c.db"
    r = vault("--catalog", str(db), "index", "slurm", "plan", "--tasks", "3", "--partition", "debug", "--dry-run",
              "--fs-gbps", "0.01", str(mirror))  # fmt: skip
    assert r.code == 0, r.err
    assert "3 tasks, 5 archives" in r.out and "#SBATCH --array=0-2" in r.out and "#SBATCH --partition=debug" in r.out
    assert "cloudvault.index.slurm_task" in r.out and "-m cloudvault.index.slurm_merge" in r.out
    assert "filesystem 0.01 GB/s" in r.out and "scanned by one task's code" in r.out
    assert not Layout(db).plan.exists() and not db.exists()  # nothing written, not even an empty catalog
    plan = ["index", "slurm", "plan", "--tasks", "3", "--dry-run", "--json", str(mirror)]
    doc = json.loads(vault("--catalog", str(db), *plan).out)
    assert [len(t["archives"]) for t in doc["plan"]["tasks"]] == [1, 2, 2]
    assert [row["tasks"] for row in doc["simulation"]] == [1, 2, 3] and doc["measured"]["bytes_per_s"] > 0
    alone = vault("--catalog", str(db), "index", "--dry-run")  # without --slurm: the local run's budget
    assert alone.code == 0 and "cores:" in alone.out and not db.exists()


# -- shards and the merge, without Slurm ------------------------------------------------------------------
def test_tasks_and_merge_give_the_catalog_a_local_index_gives(tmp_path, vault):
    mirror = _mirror(tmp_path)
    local = _local_catalog(vault, mirror, tmp_path / "local.db")
    db = tmp_path / "c.db"
    plan = _write_plan(db, mirror, 3)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    _run_tasks(db, plan, {"TMPDIR": str(scratch)})
    assert sorted(p.name for p in (Layout(db).folder / "shards").glob("*.db")) == [
        "task-0000.db", "task-0001.db", "task-0002.db"]  # fmt: skip
    assert list(scratch.iterdir()) == []  # the scratch shards were renamed away
    r = vault("--catalog", str(db), "index", "slurm", "merge", "--json")
    doc = json.loads(r.out)
    assert r.code == 5 and doc["from_shards"] == 5 and doc["flags"]["list_mismatch"] >= 1
    assert {**catalog_rows(db), "flag counts": doc["flags"]} == local
    # and what both hold is right, not just alike: every shape's frames, members and flags are there
    rows = local["archives"]
    assert len(rows) == 5 and all(count >= 9 for _, _, _, count, _, _ in rows)
    assert [frames > 1 for path, _, _, _, frames, _ in rows] == ["e2/" in path for path, *_ in rows]  # python's
    assert sum(kind == "non_utf8_name" for *_, kind, _ in local["flags"]) == 3
    again = vault("--catalog", str(db), "index", "slurm", "merge")
    assert again.code == 0 and "nothing to do" in again.out and catalog_rows(db) == _rows(local)


def test_the_merge_job_runs_the_private_entry_point_and_leaves_what_a_local_index_leaves(tmp_path, vault):
    """The merge.sbatch line, run as the job runs it: `python -P -m cloudvault.index.slurm_merge CATALOG`."""
    import shlex

    from cloudvault.index.slurm import render_merge

    mirror = _mirror(tmp_path)
    local = _local_catalog(vault, mirror, tmp_path / "local.db")
    db = tmp_path / "c.db"
    plan = _write_plan(db, mirror, 2)
    _run_tasks(db, plan)
    script = render_merge(Layout(db), plan, None)
    (line,) = [s for s in script.splitlines() if s.startswith("exec ")]
    argv = shlex.split(line)[1:]
    assert argv[1:4] == ["-P", "-m", "cloudvault.index.slurm_merge"] and "--merge" not in argv
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 5 and "merged plan" in done.stdout and done.stderr == "", done.stderr  # 5: flags
    assert catalog_rows(db) == _rows(local)
    again = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    gone = subprocess.run([*argv[:4], str(tmp_path / "none.db")], capture_output=True, text=True)
    assert gone.returncode == 3 and gone.stderr.startswith("vault: error: no Slurm index plan"), gone.stderr


def test_a_stale_shard_from_an_older_plan_is_refused(tmp_path, vault):
    mirror = _mirror(tmp_path)
    db = tmp_path / "c.db"
    old = _write_plan(db, mirror, 2)
    _run_tasks(db, old)
    stale = tmp_path / "stale.db"
    shutil.copy(Layout(db).shard(0), stale)
    (mirror / "018_e0/data/part0.tar.zst").unlink()  # the mirror changed: another plan
    new = _write_plan(db, mirror, 2)
    assert new["hash"] != old["hash"]
    _run_tasks(db, new)
    shutil.copy(stale, Layout(db).shard(0))
    r = vault("--catalog", str(db), "index", "slurm", "merge")
    assert r.code == 5 and f"made for plan {old['hash'][:12]}, not the current plan {new['hash'][:12]}" in r.err
    assert catalog_rows(db)["archives"] == []  # nothing merged
    Layout(db).shard(1).unlink()
    r = vault("--catalog", str(db), "index", "slurm", "merge")
    assert r.code == 6 and "task(s) 1 of plan" in r.err and "vault index slurm resume" in r.err


def test_a_shard_missing_member_rows_is_refused(tmp_path, vault):
    mirror = _mirror(tmp_path)
    db = tmp_path / "c.db"
    _run_tasks(db, _write_plan(db, mirror, 1))
    conn = sqlite3.connect(Layout(db).shard(0))
    conn.execute("DELETE FROM members WHERE rowid = (SELECT max(rowid) FROM members)")
    conn.commit()
    conn.close()
    r = vault("--catalog", str(db), "index", "slurm", "merge")
    assert r.code == 5 and "member rows missing" in r.err


def test_two_merges_at_once_one_waits_and_merges_nothing_twice(tmp_path, vault):
    import fcntl

    mirror = _mirror(tmp_path)
    local = _local_catalog(vault, mirror, tmp_path / "local.db")
    db = tmp_path / "c.db"
    _run_tasks(db, _write_plan(db, mirror, 2))
    fd = os.open(tmp_path / "c.db.lock", os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a running merge holds it
    base = [sys.executable, "-m", "cloudvault", "--catalog", str(db), "index", "slurm", "merge"]
    busy = subprocess.run(base, capture_output=True, text=True)
    assert busy.returncode == 6 and "--wait" in busy.stderr
    procs = [subprocess.Popen([*base, "--wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]  # fmt: skip
    time.sleep(0.5)
    assert all(p.poll() is None for p in procs)  # both wait for the lock
    os.close(fd)
    outs = sorted(p.communicate(timeout=60)[0] for p in procs)
    assert sorted(p.returncode for p in procs) == [0, 5]  # 5: the merge that ran found the listing mismatch
    assert "nothing to do" in outs[1] and "merged plan" in outs[0]
    assert catalog_rows(db) == _rows(local)


def test_a_merge_marks_its_plan_merged_and_removes_its_shards_before_it_lets_another_writer_in(tmp_path, monkeypatch):
    """A merge waiting for the lock must find the plan merged when it gets in: the marker is written, and the shards
    removed, while the first merge still holds the catalog (before, both came after its lock was let go, and a
    waiting merge under load read no marker and merged the half-removed shards again)."""
    import fcntl

    from cloudvault.index import merge as merging

    mirror = _mirror(tmp_path)
    db = tmp_path / "c.db"
    _run_tasks(db, _write_plan(db, mirror, 2))
    held = []

    def lock_held() -> bool:
        fd = os.open(tmp_path / "c.db.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def noted(what: str, step):
        def run(*args, **kwargs):
            held.append((what, lock_held()))
            return step(*args, **kwargs)

        return run

    monkeypatch.setattr(merging, "write_json", noted("marker", merging.write_json))
    monkeypatch.setattr(merging.shutil, "rmtree", noted("shards", merging.shutil.rmtree))
    merging.merge(db)
    assert held == [("marker", True), ("shards", True)]


def test_an_archive_changed_after_its_task_read_it_is_read_again_by_the_merge(tmp_path, vault):
    mirror = _mirror(tmp_path)
    db = tmp_path / "c.db"
    _run_tasks(db, _write_plan(db, mirror, 2))
    changed = mirror / "019_e1/data/part1.tar.zst"
    shutil.copy(mirror / "020_e2/data/part2.tar.zst", changed)  # another archive's bytes since the plan
    local = _local_catalog(vault, mirror, tmp_path / "local.db")
    doc = json.loads(vault("--catalog", str(db), "index", "slurm", "merge", "--json").out)
    assert doc["from_shards"] == 4 and doc["archives_read"] == 5
    assert catalog_rows(db) == _rows(local)


# The merge, killed (-9) right after its first archive's transaction.
KILLED_MERGE = """
import os, sys
import cloudvault.index.merge as merge
commit = merge.commit_archive
def commit_then_die(*args, **kwargs):
    commit(*args, **kwargs)
    os.kill(os.getpid(), 9)
merge.commit_archive = commit_then_die
from cloudvault.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_merge_killed_half_way_commits_only_the_rest_next_time(tmp_path, vault):
    mirror = _mirror(tmp_path)
    local = _local_catalog(vault, mirror, tmp_path / "local.db")
    db = tmp_path / "c.db"
    _run_tasks(db, _write_plan(db, mirror, 2))
    killed = subprocess.run([sys.executable, "-c", KILLED_MERGE, "--catalog", str(db), "index", "slurm", "merge"])
    assert killed.returncode == -9
    assert (
        len(catalog_rows(db)["archives"]) == 1
        and sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    )
    doc = json.loads(vault("--catalog", str(db), "index", "slurm", "merge", "--json").out)
    assert doc["from_shards"] == 4 and catalog_rows(db) == _rows(local)


def test_a_job_staging_out_is_still_queued_for_index_and_repro_alike(monkeypatch):
    """One ACTIVE: a job in STAGE_OUT or COMPLETING has not ended, whoever asks (index --resume, repro's wait)."""
    import cloudvault.tools.slurm as client
    from cloudvault.repro.executors.slurm import SlurmExecutor

    answer = {"text": "JobId=45 ArrayJobId=45 ArrayTaskId=0 JobState=STAGE_OUT Reason=None ExitCode=0:0\n"}
    monkeypatch.setattr(client, "run", lambda argv, **_: answer["text"])
    assert client.queued("45") == "STAGE_OUT"
    job = type("J", (), {"job_id": "45"})()
    assert SlurmExecutor().poll(job) is None
    answer["text"] = answer["text"].replace("STAGE_OUT", "PENDING").replace("Reason=None", "Reason=Dependency")
    assert client.queued("45") == "PENDING (Dependency)"
    answer["text"] = answer["text"].replace("PENDING", "COMPLETED").replace("Reason=Dependency", "Reason=None")
    assert client.queued("45") is None
    assert not client.is_active("CANCELLED by 0") and client.is_active("COMPLETING")


def test_whether_a_job_started_and_how_it_ended_are_read_in_the_slurm_client_alone(monkeypatch):
    """The repro executor asks tools.slurm (has_started, outcome), as it asks is_active: no second state rule."""
    import cloudvault.tools.slurm as client
    from cloudvault.repro.executors.slurm import SlurmExecutor

    assert not client.has_started({0: ("PENDING", 0), 1: ("PENDING", 0)})
    assert client.has_started({0: ("PENDING", 0), 1: ("RUNNING", 0)})
    assert client.outcome({0: ("COMPLETED", 0), 1: ("COMPLETED", 0)}) == "COMPLETED"
    assert client.outcome({0: ("TIMEOUT", 0), 1: ("COMPLETED", 0), 2: ("FAILED", 1)}) == "FAILED,TIMEOUT"
    assert client.outcome({}) == "ended (Slurm no longer lists it)"
    lines = "".join(f"JobId=4{i} ArrayJobId=45 ArrayTaskId={i} JobState={s} Reason=None ExitCode={c}:0\n"
                    for i, (s, c) in enumerate((("PENDING", 0), ("RUNNING", 0))))  # fmt: skip
    monkeypatch.setattr(client, "run", lambda argv, **_: lines)
    job = type("J", (), {"job_id": "45"})()
    assert SlurmExecutor().started(job)
    lines = lines.replace("RUNNING", "PENDING")
    assert not SlurmExecutor().started(job)


def test_tasks_and_merge_keep_other_formats_and_their_seek_points_as_a_local_index(tmp_path, vault):
    """A .tgz (seek points) and a .tar.bz2 and a plain .tar in a Slurm plan: read by the tasks as a local index
    reads them, their format and seek points merged into the catalog."""
    require("tar")
    src = tmp_path / "src"
    make_tree(src, big=40 << 20, non_utf8=False, long_names=True)  # a .tgz past one gzip seek-point spacing
    root = tmp_path / "Marvell_cloud"
    for i, flag in enumerate(("-z", "-j", "")):
        entry = root / f"01{i}_f" / "data"
        entry.mkdir(parents=True)
        name = ("a.tgz", "b.tar.bz2", "c.tar")[i]
        subprocess.run(["tar", *([flag] if flag else []), "-C", str(src), "-cf", str(entry / name), "."], check=True)
    formats = ("SELECT f.path, a.format, s.kind, s.data FROM archives a JOIN files f ON f.id = a.file_id "
               "LEFT JOIN seek_points s ON s.archive_id = a.id ORDER BY 1")  # fmt: skip
    r = vault("--catalog", str(tmp_path / "local.db"), "index", "--json", str(root))
    assert r.code == 0, r.err
    local = {**catalog_rows(tmp_path / "local.db"), "formats": sqlite3.connect(tmp_path / "local.db").execute(
        formats).fetchall()}  # fmt: skip
    assert [(p, f, k) for p, f, k, _ in local["formats"]] == [
        ("010_f/data/a.tgz", "tar.gz", "gzip"), ("011_f/data/b.tar.bz2", "tar.bz2", "bzip2"),
        ("012_f/data/c.tar", "tar", None)]  # fmt: skip
    db = tmp_path / "c.db"
    plan = _write_plan(db, root, 2)
    _run_tasks(db, plan)
    r = vault("--catalog", str(db), "index", "slurm", "merge", "--json")
    assert r.code == 0 and json.loads(r.out)["from_shards"] == 3, r.err
    assert {**catalog_rows(db), "formats": sqlite3.connect(db).execute(formats).fetchall()} == local
