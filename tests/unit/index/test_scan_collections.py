"""An archive's scan runs the cycle collector less often (a few short-lived containers per member), and gives the
process its collector settings back, whether the scan ends well or not."""

from __future__ import annotations

import gc
import io
import tarfile

import zstandard

from cloudvault.catalog import shards
from cloudvault.index import archives
from cloudvault.index.secrets import DEFAULT_RULES, SecretRules
from cloudvault.models import FileStat


def test_the_collector_runs_less_often_during_a_scan_and_as_before_after_it(tmp_path, monkeypatch):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(50):
            info = tarfile.TarInfo(f"logs/{i}.log")
            info.size = 3
            tar.addfile(info, io.BytesIO(b"ok\n"))
    (tmp_path / "m").mkdir()
    archive = tmp_path / "m/a.tar.zst"
    archive.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    seen = []
    scan = archives.ArchiveScan.__iter__

    def noting(self):
        seen.append(gc.get_threshold()[0])
        yield from scan(self)

    monkeypatch.setattr(archives.ArchiveScan, "__iter__", noting)
    before = gc.get_threshold()
    stat = archive.stat()
    st = FileStat("a.tar.zst", None, "file", stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, 0o644, None)
    shard = shards.open_shard(str(tmp_path / "s.db"))
    result = archives.scan_into(shard, str(tmp_path / "m"), st, SecretRules(dict(DEFAULT_RULES)))
    assert result.status == "ok" and result.member_count == 50
    assert seen == [archives.SCAN_COLLECT_EVERY] and gc.get_threshold() == before
    missing = FileStat("gone.tar.zst", None, "file", 1, 1, 1, 1, 0o644, None)  # cannot be read: OSError inside
    assert archives.scan_into(shard, str(tmp_path / "m"), missing, SecretRules({})).status == "unreadable"
    assert gc.get_threshold() == before
