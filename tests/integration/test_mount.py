"""`vault mount` over real FUSE (fuse3, /dev/fuse, mfusepy): the demo mirror mounted, read with ordinary tools."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest import REPO, require, vault_subprocess

from cloudvault.mount.session import mounted

# mounts through FUSE
pytestmark = pytest.mark.fuse

ENV_LOG = "019_aicluster_dump_debugger/data/saturate_logs_n61.tar.zst/logs/saturate_env.log"


@pytest.fixture
def fuse():
    """fusermount3, /dev/fuse and mfusepy; missing: skip, but with CI=true fail."""
    require("fusermount3")
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError):
        if os.environ.get("CI") == "true":
            pytest.fail("mfusepy (the mount extra) is required in CI but is not installed")
        pytest.skip("mfusepy not installed")
    if not os.path.exists("/dev/fuse"):
        if os.environ.get("CI") == "true":
            pytest.fail("/dev/fuse is required in CI")
        pytest.skip("no /dev/fuse")


class Mount:
    def __init__(self, catalog: Path, point: Path) -> None:
        self.catalog, self.point = catalog, point
        self.pid: int | None = None
        self.log = Path(f"{catalog}.cache/mount.log")

    def start(self, *options: str) -> Mount:
        done = vault_subprocess("--catalog", str(self.catalog), "mount", *options, str(self.point))
        assert done.returncode == 0, done.stderr
        self.pid = int(done.stdout.split("(pid ")[1].split(",")[0])
        return self

    def umount(self) -> subprocess.CompletedProcess:
        return vault_subprocess("umount", str(self.point))

    def stop(self) -> None:
        if mounted(self.point):
            subprocess.run(["fusermount3", "-u", "-z", str(self.point)], check=False)
        if self.pid:
            for _ in range(100):
                try:
                    os.kill(self.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)


@pytest.fixture
def mount_of(fuse, tmp_path):
    made = []

    def make(catalog: Path, *options: str) -> Mount:
        point = tmp_path / f"mnt{len(made)}"
        point.mkdir()
        made.append(Mount(catalog, point).start(*options))
        return made[-1]

    yield make
    for m in made:
        m.stop()


def archives(catalog: Path) -> list[tuple[str, str, str]]:
    """(mirror root, archive path, entry) of every indexed archive."""
    conn = sqlite3.connect(catalog)
    sql = ("SELECT m.root, f.path, f.entry_id FROM archives a JOIN files f ON f.id = a.file_id "
           "JOIN mirrors m ON m.id = f.mirror_id WHERE a.status = 'ok' ORDER BY f.path")  # fmt: skip
    rows = conn.execute(sql).fetchall()
    conn.close()
    assert len(rows) >= 10
    return rows


def gnu_tar(archive: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    subprocess.run([require("tar"), "--zstd", "-xf", str(archive), "-C", str(dest)], check=True)
    return dest


def tree_files(folder: Path) -> dict[str, Path]:
    return {str(p.relative_to(folder)): p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()}


def test_every_member_reads_as_gnu_tar_and_vault_extract_give_it(demo_catalog, mount_of, tmp_path, vault):
    m = mount_of(demo_catalog)
    top = m.point / "Marvell_cloud"
    checked = 0
    for i, (root, path, entry) in enumerate(archives(demo_catalog)):
        tar_files = tree_files(gnu_tar(Path(root) / path, tmp_path / f"tar{i}"))
        out = tmp_path / f"vx{i}"
        name = path.rsplit("/", 1)[-1]
        got = vault("--catalog", str(demo_catalog), "extract", entry, "*", "--archive", name,
                    "-o", str(out), "--keep-path")  # fmt: skip
        assert got.code == 0, got.err
        vault_files = tree_files(out)
        mounted_files = tree_files(top / path)
        secret = {ENV_LOG.split(".tar.zst/")[1]} if path in ENV_LOG else set()
        assert set(tar_files) - secret == set(mounted_files) - secret
        for rel, p in tar_files.items():
            if rel in secret:
                continue
            data = (top / path / rel).read_bytes()
            assert data == p.read_bytes(), f"{path} :: {rel}"
            assert data == vault_files[rel].read_bytes()
            assert (top / path / rel).stat().st_size == len(data)
            checked += 1
        assert (m.point / "Marvell_cloud" / (path + ".raw")).read_bytes() == (Path(root) / path).read_bytes()
    assert checked > 100


def test_plain_files_links_and_modes_are_the_mirrors(demo_catalog, demo_mirror, mount_of):
    m = mount_of(demo_catalog)
    top = m.point / "Marvell_cloud"
    for p in demo_mirror.rglob("*"):
        there = top / p.relative_to(demo_mirror)
        if p.is_symlink():
            assert os.readlink(there) == os.readlink(p)
        elif p.is_file() and not p.name.endswith(".tar.zst"):
            assert there.read_bytes() == p.read_bytes(), p
            assert there.stat().st_mtime_ns // 10**6 == p.stat().st_mtime_ns // 10**6
            assert there.stat().st_mode & 0o777 == p.stat().st_mode & 0o777
        elif p.name.endswith(".tar.zst"):
            assert there.is_dir()


def test_find_grep_cp_and_python_work_inside_archives(demo_catalog, demo_mirror, mount_of, tmp_path):
    m = mount_of(demo_catalog)
    archive = m.point / "Marvell_cloud/018_aicluster_breakdown_debugger/data/accept_g07.tar.zst"
    found = subprocess.run(["find", str(archive), "-type", "f"], capture_output=True, text=True, check=True)
    assert f"{archive}/dumps/accept_meta.json" in found.stdout.splitlines()
    needle = (archive / "dumps/accept_meta.json").read_text()[:12]
    grep = subprocess.run(["grep", "-rlF", needle, str(m.point / "Marvell_cloud/018_aicluster_breakdown_debugger")],
                          capture_output=True, text=True)  # fmt: skip
    assert f"{archive}/dumps/accept_meta.json" in grep.stdout.splitlines(), grep.stderr
    subprocess.run(["cp", "-r", str(archive), str(tmp_path / "copy")], check=True)
    tar = gnu_tar(demo_mirror / "018_aicluster_breakdown_debugger/data/accept_g07.tar.zst", tmp_path / "tar")
    assert subprocess.run(["diff", "-r", str(tar), str(tmp_path / "copy")]).returncode == 0
    code = f"import sys; sys.stdout.write(open({str(archive / 'dumps/accept_meta.json')!r}).read())"
    py = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert py.stdout == (tar / "dumps/accept_meta.json").read_text()


def test_everything_that_writes_is_erofs(demo_catalog, mount_of):
    m = mount_of(demo_catalog)
    archive = m.point / "Marvell_cloud/018_aicluster_breakdown_debugger/data/accept_g07.tar.zst"
    member = archive / "dumps/accept_meta.json"
    attempts = [lambda: os.open(member, os.O_RDWR), lambda: os.open(member, os.O_WRONLY | os.O_APPEND),
                lambda: os.open(archive / "new", os.O_WRONLY | os.O_CREAT),
                lambda: os.mkdir(archive / "d"), lambda: os.rename(member, archive / "moved"),
                lambda: os.chmod(member, 0o777), lambda: os.unlink(member), lambda: os.truncate(member, 0),
                lambda: os.symlink("x", archive / "l")]  # fmt: skip
    for attempt in attempts:
        with pytest.raises(OSError) as caught:
            attempt()
        assert caught.value.errno == errno.EROFS
    assert member.read_bytes()  # still there, unchanged


def test_flagged_secret_lists_with_its_flag_but_is_unreadable_unless_allowed(demo_catalog, mount_of):
    m = mount_of(demo_catalog)
    secret = m.point / "Marvell_cloud" / ENV_LOG
    assert secret.name in os.listdir(secret.parent)
    assert os.getxattr(secret, "user.cloudvault.flag").startswith(b"secret: hf_token")
    with pytest.raises(PermissionError):
        secret.read_bytes()
    assert "not readable without --allow-flagged" in m.log.read_text()
    allowed = mount_of(demo_catalog, "--allow-flagged")
    assert (allowed.point / "Marvell_cloud" / ENV_LOG).read_bytes()


def damaged_copy(demo_mirror: Path, tmp_path: Path, vault) -> tuple[Path, Path]:
    mirror = tmp_path / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    db = tmp_path / "copy.db"
    assert vault("--catalog", str(db), "index", "--mirror", "marvell_cloud", "--quiet", str(mirror)).code == 0
    return mirror, db


def test_flipped_byte_is_eio_on_the_damaged_member_and_right_bytes_for_the_others(demo_mirror, tmp_path, vault,
                                                                                  mount_of):  # fmt: skip
    mirror, db = damaged_copy(demo_mirror, tmp_path, vault)
    rel = "018_aicluster_breakdown_debugger/data/accept_g07.tar.zst"
    conn = sqlite3.connect(db)
    sql = "SELECT a.id FROM archives a JOIN files f ON f.id = a.file_id WHERE f.path = ?"
    (aid,) = conn.execute(sql, (rel,)).fetchone()
    frames = conn.execute("SELECT comp_offset, comp_size, raw_offset, raw_size FROM frames WHERE archive_id = ? "
                          "ORDER BY idx", (aid,)).fetchall()  # fmt: skip
    members = conn.execute("SELECT path, data_offset, size FROM members WHERE archive_id = ? AND type = 'file' "
                           "AND size > 0", (aid,)).fetchall()  # fmt: skip
    conn.close()
    assert len(frames) >= 3
    comp, comp_size, raw, raw_size = frames[2]
    archive = mirror / rel
    before = archive.stat()
    blob = bytearray(archive.read_bytes())
    blob[comp + comp_size // 2] ^= 0xFF
    archive.write_bytes(blob)
    os.utime(archive, ns=(before.st_atime_ns, before.st_mtime_ns))  # as indexed: only the bytes differ
    tar = gnu_tar(demo_mirror / rel, tmp_path / "tar")
    m = mount_of(db)
    damaged = [p for p, off, size in members if off < raw + raw_size and off + size > raw]
    good = [p for p in (p for p, _, _ in members) if p not in damaged]
    assert damaged and good
    for p in damaged:
        with pytest.raises(OSError) as caught:
            (m.point / "Marvell_cloud" / rel / p).read_bytes()
        assert caught.value.errno == errno.EIO
    for p in good:
        assert (m.point / "Marvell_cloud" / rel / p).read_bytes() == (tar / p).read_bytes()
    assert f"EIO /Marvell_cloud/{rel}/{damaged[0]}" in m.log.read_text()


def test_member_whose_bytes_differ_from_the_catalogs_blake3_is_eio_and_logged(demo_catalog, mount_of):
    rel = "018_aicluster_breakdown_debugger/data/accept_g07.tar.zst"
    conn = sqlite3.connect(demo_catalog)
    conn.execute("UPDATE members SET blake3 = ? WHERE path = 'dumps/accept_meta.json'", ("0" * 64,))
    conn.commit()
    conn.close()
    m = mount_of(demo_catalog)
    member = m.point / "Marvell_cloud" / rel / "dumps/accept_meta.json"
    for _ in range(2):  # and again: the verdict is kept
        with pytest.raises(OSError) as caught:
            member.read_bytes()
        assert caught.value.errno == errno.EIO
    assert "accept_meta.json: the" in m.log.read_text() and "offset 0 do not match" in m.log.read_text()
    assert (m.point / "Marvell_cloud" / rel / "logs/accept_00.log").read_bytes()


def test_stale_archive_is_eio_with_a_line_naming_it(demo_mirror, tmp_path, vault, mount_of):
    mirror, db = damaged_copy(demo_mirror, tmp_path, vault)
    rel = "018_aicluster_breakdown_debugger/data/accept_g07.tar.zst"
    m = mount_of(db)
    assert (m.point / "Marvell_cloud" / rel / "logs/accept_00.log").read_bytes()  # the archive is open now
    os.utime(mirror / rel, ns=(1, 1))
    with pytest.raises(OSError) as caught:
        (m.point / "Marvell_cloud" / rel / "dumps/accept_meta.json").read_bytes()
    assert caught.value.errno == errno.EIO
    assert rel in m.log.read_text().splitlines()[-1]
    assert "dumps" in os.listdir(m.point / "Marvell_cloud" / rel)  # listing still answers from the catalog


def test_a_background_mount_is_served_by_the_private_entry_point_not_the_public_grammar(demo_catalog, mount_of):
    """The child `vault mount` leaves serving is `python -P -m cloudvault.mount.serve OPTIONS` (a renamed flag of
    the public grammar cannot break it), with the options it was given."""
    m = mount_of(demo_catalog, "--entry", "018", "--cache-mb", "32")
    argv = Path(f"/proc/{m.pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    assert argv[1:4] == ["-P", "-m", "cloudvault.mount.serve"], argv
    assert "--foreground" not in argv and "mount" not in argv
    options = json.loads(argv[4])
    assert (options["entry"], options["cache_mb"], options["mountpoint"]) == ("018", 32, str(m.point))


def test_one_entry_mounts_at_the_root(demo_catalog, mount_of):
    m = mount_of(demo_catalog, "--entry", "018")
    assert "data" in os.listdir(m.point)
    assert (m.point / "data/accept_g07.tar.zst/dumps/accept_meta.json").read_bytes()


def _gone(pid: int) -> None:
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"mount process {pid} still running")


def test_unmount_with_readers_open(demo_catalog, mount_of):
    m = mount_of(demo_catalog)
    member = m.point / "Marvell_cloud/018_aicluster_breakdown_debugger/data/accept_g07.tar.zst/logs/accept_00.log"
    want = member.read_bytes()
    with open(member, "rb") as reader:
        head = reader.read(100)
        done = m.umount()
        assert done.returncode == 0, done.stderr
        assert not mounted(m.point)
        assert head + reader.read() == want  # the open reader keeps reading after the lazy unmount
    assert os.listdir(m.point) == []
    _gone(m.pid)


def test_kill_9_then_umount_leaves_no_stuck_mount_point(demo_catalog, mount_of):
    m = mount_of(demo_catalog)
    os.kill(m.pid, signal.SIGKILL)
    _gone(m.pid)
    with pytest.raises(OSError) as caught:
        os.listdir(m.point)
    assert caught.value.errno == errno.ENOTCONN
    done = m.umount()
    assert done.returncode == 0, done.stderr
    assert not mounted(m.point)
    assert os.listdir(m.point) == []
    again = m.umount()
    assert again.returncode == 2 and "is not a mount point" in again.stderr


def test_foreground_mount_unmounts_on_ctrl_c(demo_catalog, fuse, tmp_path):
    point = tmp_path / "fg"
    point.mkdir()
    child = subprocess.Popen([sys.executable, "-m", "cloudvault", "--catalog", str(demo_catalog), "mount",
                              "--foreground", "--entry", "018", str(point)], stderr=subprocess.PIPE)  # fmt: skip
    try:
        for _ in range(300):
            if mounted(point) and os.listdir(point):
                break
            time.sleep(0.05)
        assert "data" in os.listdir(point)
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=20) == 0
        assert not mounted(point)
    finally:
        if mounted(point):
            subprocess.run(["fusermount3", "-u", "-z", str(point)])
        child.kill()


def test_missing_binding_is_one_line_naming_the_extra(demo_catalog, tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "mfusepy.py").write_text("raise ImportError('no mfusepy')\n")
    env = {**os.environ, "PYTHONPATH": f"{shim}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    (tmp_path / "m").mkdir()
    done = vault_subprocess("--catalog", str(demo_catalog), "mount", str(tmp_path / "m"), env=env)
    assert done.returncode == 7  # a missing tool or extra (errors.Prerequisite)
    assert done.stderr.strip().splitlines() == [
        "vault: error: mfusepy is not installed: install the mount extra (pip install 'cloudvault[mount]', "
        "which brings mfusepy)"
    ]


def test_016_plot_script_run_from_the_mount_redraws_its_record_byte_identical(demo_catalog, mount_of, tmp_path):
    """016_plots.toml's run, its inputs read through the mount: the stored results folder, minus the files the
    script makes, linked into a work folder (the mount is read-only; the script writes where it runs)."""
    import tomllib

    recipe = tomllib.loads((REPO / "recipes/repro/016_plots.toml").read_text())
    m = mount_of(demo_catalog, "--entry", recipe["entry"])
    results = m.point / recipe["inputs"]["results"]["path"]
    made = {f.split("/")[0] for f in recipe["record"]["files"]}
    work = tmp_path / "work"
    work.mkdir()
    for item in os.listdir(results):
        if item not in made:
            (work / item).symlink_to(results / item)
    args = recipe["run"]["args"].split()
    done = subprocess.run([recipe["run"]["program"], *args], cwd=work, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for name in recipe["record"]["files"]:
        assert (work / name).read_bytes() == (results / name).read_bytes(), name
    assert len(recipe["record"]["files"]) == 6


def test_sparse_and_hardlinked_members_read_as_gnu_tar_extracts_them(fuse, tmp_path, vault, mount_of):
    """Members the demo lacks: a sparse file (holes read as zeros, at any offset) and a hardlink whose target was
    updated later with `tar -r` (the link keeps the version stored before it)."""
    tar = require("tar")
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "disk.img", "wb") as fh:
        for i, at in enumerate((0, 9 << 20, 17 << 20)):
            fh.seek(at)
            fh.write(bytes([0x41 + i]) * 5000)
        fh.truncate(24 << 20)
    (src / "model.cfg").write_text("version 1\n")
    os.link(src / "model.cfg", src / "model.lnk")
    raw = tmp_path / "t.tar"
    subprocess.run([tar, "--format=pax", "--sparse", "-C", str(src), "-cf", str(raw), "disk.img", "model.cfg",
                    "model.lnk"], check=True)  # fmt: skip
    (src / "model.cfg").write_text("version 2, appended later\n")
    subprocess.run([tar, "-C", str(src), "-rf", str(raw), "model.cfg"], check=True)
    entry = tmp_path / "m" / "018_t" / "data"
    entry.mkdir(parents=True)
    subprocess.run([require("zstd"), "-q", str(raw), "-o", str(entry / "t.tar.zst")], check=True)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    m = mount_of(db)
    folder = m.point / "m/018_t/data/t.tar.zst"
    expected = (src / "disk.img").read_bytes()
    assert (folder / "disk.img").stat().st_size == len(expected)
    assert (folder / "disk.img").read_bytes() == expected
    with open(folder / "disk.img", "rb", buffering=0) as fh:
        for at in (9 << 20, (9 << 20) - 3, 17 << 20, (24 << 20) - 10, 5):
            fh.seek(at)
            assert fh.read(7000) == expected[at : at + 7000]
    assert (folder / "model.lnk").read_text() == "version 1\n"
    assert (folder / "model.cfg").read_text() == "version 2, appended later\n"


def test_016_recipe_with_inputs_via_mount_reproduces_from_links_into_a_mount(demo_catalog, fuse, tmp_path, vault):
    text = (REPO / "recipes/repro/016_plots.toml").read_text()
    assert '[inputs.results]\npath = "data/results"\n' in text
    recipe = tmp_path / "016_plots_mounted.toml"
    recipe.write_text(text.replace("[inputs.results]\n", '[inputs.results]\nvia = "mount"\n'))
    result = vault("--catalog", str(demo_catalog), "repro", str(recipe), "--out", str(tmp_path / "runs"))
    assert result.code == 0, result.err
    assert "REPRODUCED: outputs 6/6 files identical" in result.out
    (run,) = (tmp_path / "runs").iterdir()
    inputs = [Path(d, f) for d, _, names in os.walk(run / "work") for f in names if f == "per_request.csv"]
    assert inputs and all(p.is_symlink() and f"{run}/.mount/" in os.readlink(p) for p in inputs)
    assert not mounted(run / ".mount")  # released when the run ended
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("[inputs.results]\n", '[inputs.results]\nvia = "nfs"\n'))
    result = vault("--catalog", str(demo_catalog), "repro", str(bad), "--out", str(tmp_path / "runs2"))
    assert result.code == 2 and "inputs.results.via is 'nfs'" in result.err


def test_concurrent_readers_of_a_fresh_mount_all_get_the_right_bytes(demo_catalog, demo_mirror, mount_of, tmp_path):
    """Eight threads over every member at once, on a mount none has listed yet (archives laid out on first
    lookup, one catalog connection, one frame cache shared by all)."""
    from concurrent.futures import ThreadPoolExecutor

    wanted = {}
    for i, (root, path, _) in enumerate(archives(demo_catalog)):
        for rel, p in tree_files(gnu_tar(Path(root) / path, tmp_path / f"t{i}")).items():
            if f"{path}/{rel}" != ENV_LOG:
                wanted[f"{path}/{rel}"] = p.read_bytes()
    m = mount_of(demo_catalog)
    top = m.point / "Marvell_cloud"
    jobs = sorted(wanted) * 3
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda rel: (top / rel).read_bytes(), jobs))
    assert all(g == wanted[rel] for rel, g in zip(jobs, got, strict=True))


def test_the_mount_process_stays_within_its_cache_budget_reading_more_than_it(fuse, tmp_path, vault, mount_of):
    """--cache-mb bounds what the mount keeps (decoded frames and verified pieces together): reading 96 MiB of
    pzstd frames through a 16 MiB budget, the process's peak RSS stays within the budget and the stated constant,
    and every byte is what tarfile wrote."""
    from cloudvault.mount.serve import RSS_BEYOND_CACHE_MIB

    entry = tmp_path / "mirror" / "018_big"
    entry.mkdir(parents=True)
    raw, wanted = tmp_path / "big.tar", {}
    with tarfile.open(raw, "w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(24):
            data = os.urandom(2 << 20) * 2  # 4 MiB, half compressible: frames of a few MiB
            info = tarfile.TarInfo(f"dumps/part{i:02d}.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            wanted[info.name] = hashlib.sha256(data).hexdigest()
    subprocess.run([require("pzstd"), "-q", "-p", "2", str(raw), "-o", str(entry / "big.tar.zst")], check=True)
    db = tmp_path / "catalog.db"
    assert vault("--catalog", str(db), "index", "--quiet", str(tmp_path / "mirror")).code == 0
    m = mount_of(db, "--cache-mb", "16")
    top = m.point / "mirror" / "018_big" / "big.tar.zst"
    for name, digest in wanted.items():
        assert hashlib.sha256((top / name).read_bytes()).hexdigest() == digest, name
    peak = next(int(line.split()[1]) >> 10 for line in Path(f"/proc/{m.pid}/status").read_text().splitlines()
                if line.startswith("VmHWM"))  # fmt: skip
    assert peak <= 16 + RSS_BEYOND_CACHE_MIB, f"peak RSS {peak} MiB with --cache-mb 16"


def _walk(tree, folder: str) -> list:
    """Every node under folder, through the tree's own listing and lookup (as the kernel asks)."""
    found = []
    for name in tree.names(folder):
        node = tree.lookup(f"{folder}/{name}")
        found += [node, *(_walk(tree, f"{folder}/{name}") if node.is_dir else [])]
    return found


def test_small_members_of_one_frame_decode_it_once_and_the_cache_stays_bounded(demo_catalog):
    from cloudvault.catalog.db import open_shared_reader
    from cloudvault.mount.frames import FrameCache, Sources
    from cloudvault.mount.tree import build_tree

    conn = open_shared_reader(demo_catalog)
    tree = build_tree(conn)
    rel = "/Marvell_cloud/018_aicluster_breakdown_debugger/data/accept_g07.tar.zst"
    (frames,) = conn.execute("SELECT frame_count FROM archives a JOIN files f ON f.id = a.file_id "
                             "WHERE f.path = ?", (rel.split("/", 2)[2],)).fetchone()  # fmt: skip
    assert tree.lookup(rel + "/dumps") is not None and frames >= 3
    members = [n for n in _walk(tree, rel) if n.data is not None]
    assert len(members) > frames
    cache = FrameCache(64 << 20)
    sources = Sources(conn, cache, tree.lock)
    for _ in range(3):
        for node in members:
            assert len(sources.reader(node.data)(0, node.size)) == node.size
    assert cache.decodes <= frames  # each frame decoded once, whatever the number of members and passes
    small = FrameCache(2 * max(d.raw_size for d in cache._frames.values()))
    sources = Sources(conn, small, tree.lock)
    for node in members:
        sources.reader(node.data)(0, node.size)
    assert small.used <= small.limit
    sources.close()
    conn.close()


def test_reading_the_second_half_of_a_frame_has_the_next_decoded_ahead(demo_catalog):
    """A reader of a member that goes on into the next frame finds it decoded by the background thread: reading
    the end of frame 0 puts frame 1 in the cache, whole, though no read asked for a byte of it; a member that
    ends in its frame has nothing decoded ahead."""
    from cloudvault.catalog.db import open_shared_reader
    from cloudvault.mount.frames import FrameCache, Sources

    conn = open_shared_reader(demo_catalog)
    rel = "018_aicluster_breakdown_debugger/data/accept_g07.tar.zst"
    (file_id,) = conn.execute("SELECT id FROM files WHERE path = ?", (rel,)).fetchone()
    cache = FrameCache(64 << 20)
    sources = Sources(conn, cache)
    archive = sources._archive(file_id)
    first, second = archive._frames[0], archive._frames[1]
    assert len(archive.read(first.raw_size - 10, 10, first.raw_size)) == 10
    sources._ahead.submit(lambda: None).result()  # the one background thread has done what it was given
    assert (file_id, 1) not in cache
    assert len(archive.read(first.raw_size - 10, 10, first.raw_size + 10)) == 10
    sources._ahead.submit(lambda: None).result()
    ahead = cache._frames.get((file_id, 1))
    assert ahead is not None and ahead._done == second.raw_size
    sources.close()
    conn.close()


def test_a_missing_catalog_or_entry_is_its_own_error_before_anything_is_mounted(demo_catalog, fuse, tmp_path):
    point = tmp_path / "m"
    point.mkdir()
    done = vault_subprocess("--catalog", str(tmp_path / "none.db"), "mount", str(point))
    assert done.returncode == 3 and "none.db" in done.stderr and not mounted(point)
    done = vault_subprocess("--catalog", str(demo_catalog), "mount", "--entry", "999", str(point))
    assert done.returncode == 3 and "999" in done.stderr and not mounted(point)
    done = vault_subprocess("--catalog", str(demo_catalog), "mount", str(tmp_path / "not-there"))
    assert done.returncode == 2 and "not a folder" in done.stderr


def test_mount_json_is_the_documented_shape_and_names_the_serving_process(demo_catalog, fuse, tmp_path):
    from tests.cli.json_shapes import check

    point = tmp_path / "mnt-json"
    point.mkdir()
    done = vault_subprocess("--catalog", str(demo_catalog), "mount", "--entry", "018", "--json", str(point))
    assert done.returncode == 0, done.stderr
    try:
        doc = json.loads(done.stdout)
        check(doc, "mount.md", "mount")
        assert (doc["mountpoint"], doc["entry"], doc["catalog"]) == (str(point), "018", str(demo_catalog))
        argv = Path(f"/proc/{doc['pid']}/cmdline").read_bytes().decode().split("\0")
        assert "cloudvault.mount.serve" in argv and Path(doc["log"]).is_file()
        assert "data" in os.listdir(point)
    finally:
        ended = vault_subprocess("umount", str(point))
    assert ended.returncode == 0, ended.stderr
    _gone(doc["pid"])
