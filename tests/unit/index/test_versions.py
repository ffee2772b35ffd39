"""The verdict on a file read again against the version recorded: pure, no disk."""

from __future__ import annotations

import pytest

from cloudvault.catalog.generations import Recorded
from cloudvault.index.versions import judge
from cloudvault.models import FileStat

A, B = "a" * 64, "b" * 64
WAS = FileStat("e/x", None, "file", 10, 1000, 5, 7, 0o644)


def recorded(blake3: str | None = A, status: str | None = None, kind: str = "file", link: str | None = None):
    return Recorded(1, kind, WAS.size, WAS.mtime_ns, link, blake3, 3, 9 if status else None, status)


@pytest.mark.parametrize("old,st,digest,status,taken,verdict", [
    (None, WAS, A, "ok", False, "added"),
    (recorded(), WAS._replace(ctime_ns=6), A, "ok", False, "same"),  # touched, same bytes: its generation kept
    (recorded(), WAS._replace(mtime_ns=2000), B, "ok", False, "modified"),
    (recorded(), WAS._replace(size=11), B, "ok", False, "modified"),
    (recorded(), WAS._replace(ctime_ns=6), B, "ok", False, "changed_in_place"),  # bit rot: same size, same mtime
    (recorded(), WAS._replace(ctime_ns=6), B, "ok", True, "modified"),  # --accept, or it moved while read
    (recorded(), WAS._replace(ctime_ns=6), None, "ok", False, "unreadable"),  # the reference is kept
    (recorded(status="ok"), WAS._replace(size=5), B, "truncated", False, "damaged"),  # cut off: a new size
    (recorded(status="ok"), WAS._replace(ctime_ns=6), B, "corrupt_frame", False, "damaged"),
    (recorded(status="ok"), WAS._replace(size=5), B, "truncated", True, "modified"),
    (recorded(status="truncated"), WAS._replace(size=50, mtime_ns=9), B, "ok", False, "modified"),  # repaired
    (recorded(None, kind="symlink", link="t"), WAS._replace(kind="symlink", link_target="u"), None, "ok", False,
     "modified"),
    (recorded(), WAS._replace(kind="symlink", link_target="x"), None, "ok", False, "modified"),
])  # fmt: skip
def test_verdicts(old, st, digest, status, taken, verdict):
    assert judge(old, st, digest, status, taken) == verdict
