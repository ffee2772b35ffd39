"""The mount's tree over a real catalog: an archive's members looked up one path at a time (a lookup in an archive
of thousands of members holds a handful of nodes, not the archive laid out), and laid out as GNU tar -x leaves
them (an appended update wins, a hardlink shows its target as it was at the link's place, implied folders)."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tracemalloc

import pytest
from conftest import main, require

from cloudvault.catalog.db import open_shared_reader
from cloudvault.mount.frames import FrameCache, Sources
from cloudvault.mount.tree import build_tree

MANY = 6000


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mtime, info.mode = kind, link, 1_760_000_000, 0o644
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


@pytest.fixture
def mounted_tree(tmp_path):
    """A mirror with one archive: MANY small members, an update appended, a hardlink, implied folders."""
    require("zstd")
    entry = tmp_path / "mirror" / "018_tree"
    entry.mkdir(parents=True)
    raw = tmp_path / "a.tar"
    with tarfile.open(raw, "w", format=tarfile.GNU_FORMAT) as tar:
        _add(tar, "cfg/run.toml", b"version 1\n")
        for i in range(MANY):
            _add(tar, f"logs/{i // 1000}/rank{i:05d}.log", b"step %d\n" % i)
        _add(tar, "deep/er/still/leaf.txt", b"implied folders above me\n")
        _add(tar, "link.toml", kind=tarfile.LNKTYPE, link="cfg/run.toml")
        _add(tar, "cfg/run.toml", b"version 2, appended by tar -r\n")
    subprocess.run(["zstd", "-q", str(raw), "-o", str(entry / "a.tar.zst")], check=True)
    db = tmp_path / "catalog.db"
    assert main(["--catalog", str(db), "index", "--quiet", str(tmp_path / "mirror")]) == 0
    conn = open_shared_reader(db)
    yield build_tree(conn), conn, raw
    conn.close()


def _walk(tree, folder: str) -> dict[str, object]:
    found = {}
    for name in tree.names(folder):
        node = tree.lookup(f"{folder}/{name}")
        found[f"{folder}/{name}"] = node
        if node.is_dir:
            found |= _walk(tree, f"{folder}/{name}")
    return found


def test_a_lookup_in_an_archive_of_thousands_of_members_holds_a_handful_of_nodes(mounted_tree):
    tree, conn, _ = mounted_tree
    top = "/mirror/018_tree/a.tar.zst"
    asked = []
    conn.set_trace_callback(asked.append)
    tracemalloc.start()
    node = tree.lookup(f"{top}/logs/5/rank05999.log")
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    conn.set_trace_callback(None)
    assert node is not None and node.size == len(b"step 5999\n")
    assert held < 64 << 10, f"{held >> 10} KiB held for one lookup in an archive of {MANY} members"
    assert len(asked) <= 4, asked


def test_the_tree_is_what_gnu_tar_extracts_and_every_member_reads_its_bytes(mounted_tree, tmp_path):
    tree, conn, raw = mounted_tree
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run([require("tar"), "-xf", str(raw), "-C", str(out)], check=True)
    top = "/mirror/018_tree/a.tar.zst"
    nodes = _walk(tree, top)
    on_disk = {f"{top}/{p.relative_to(out)}": p for p in out.rglob("*")}
    assert sorted(nodes) == sorted(on_disk)
    sources = Sources(conn, FrameCache(8 << 20), tree.lock)
    for path, node in nodes.items():
        assert node.is_dir == on_disk[path].is_dir(), path
        if not node.is_dir:
            read = sources.reader(node.data)
            assert read(0, node.size + 10) == on_disk[path].read_bytes(), path
            assert oct(node.mode & 0o777) == oct(os.stat(on_disk[path]).st_mode & 0o777), path
    assert nodes[f"{top}/link.toml"].size == len(b"version 1\n")  # linked before the update: tar keeps version 1
    sources.close()
