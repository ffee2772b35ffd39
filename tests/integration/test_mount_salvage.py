"""Through `vault mount`, after a routine re-index of an archive damaged since it was indexed: the members of its
intact frames read as tarfile reads the undamaged copy, the members the damage took are EIO at open (no byte of
them is handed out), and a plain file changed in place is EIO too."""

from __future__ import annotations

import errno
import shutil
import subprocess

import pytest
from archives import flip_byte, three_frame_mirror
from conftest import require
from faults.test_salvage import ARCHIVE, frame_table, in_frames, tar_members

from integration.test_mount import fuse, mount_of  # noqa: F401 (fixtures)

pytestmark = pytest.mark.fuse


def test_after_reindex_intact_frames_read_through_the_mount_and_damaged_members_are_eio(tmp_path, vault, mount_of):  # noqa: F811
    require("pzstd")
    root = three_frame_mirror(tmp_path / "m", tmp_path / "work")
    db = tmp_path / "cat.db"
    assert vault("--catalog", str(db), "index", "--quiet", str(root)).code == 0
    good = tmp_path / "good.tar.zst"
    shutil.copy2(root / ARCHIVE, good)
    frames, members = frame_table(good), tar_members(good)
    flip_byte(root / ARCHIVE, frames[1][0] + frames[1][1] // 2)
    flip_byte(root / "exp02/notes.txt", 2)
    assert vault("--catalog", str(db), "index", "--quiet", str(root)).code == 5
    m = mount_of(db)
    top = m.point / root.name / ARCHIVE
    intact = [n for n, (off, data) in members.items() if not in_frames(off, len(data), frames, {1})]
    assert intact
    for name in intact:
        assert (top / name).read_bytes() == members[name][1]
    refused = [n for n in members if n not in intact]
    eio = 0
    for name in refused:
        try:
            data = (top / name).read_bytes()
        except OSError as exc:
            assert exc.errno == errno.EIO
            eio += 1
            continue
        assert data == members[name][1]  # a member of the damaged frame that ends before the damage
    assert eio >= 1
    head = subprocess.run(["head", "-c", "100", str(m.point / root.name / "exp02/notes.txt")], capture_output=True)
    assert head.returncode != 0 and head.stdout == b""
