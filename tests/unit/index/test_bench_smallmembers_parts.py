"""bench/smallmembers_parts.py's lower bound: the least wall time any design could index the small members in, from
the parts every design must do (decode, tar headers, BLAKE3, the secret prefilter, the catalog's rows, their search
rows, the COMMIT), each as measured alone, split over the cores with nothing else paid, plus the interpreter's start."""

from __future__ import annotations

import os

import pytest
from conftest import bench_module


def _bench():
    return bench_module("smallmembers_parts")


PARTS = {"decode": 0.19, "scan: tar headers (native walk)": 0.03, "scan: BLAKE3 (one call a run)": 0.09,
         "scan: secret prefilter": 0.09, "commit: catalog rows": 0.12, "commit: search rows (FTS5)": 0.14,
         "commit: the rest (file, archive rows, COMMIT)": 0.09}  # fmt: skip


def test_the_bound_is_the_parts_split_over_the_cores_plus_the_start():
    bound = _bench().lower_bound(PARTS, cores=2, start=0.02)
    assert bound == pytest.approx(sum(PARTS.values()) / 2 + 0.02)


def test_the_catalog_s_writes_are_one_thread_s_so_they_bound_it_where_they_outweigh_the_share():
    # one SQLite connection writes the rows, their search rows and the COMMIT, one after another
    parts = {**PARTS, "commit: search rows (FTS5)": 0.9}
    bound = _bench().lower_bound(parts, cores=16, start=0.02)
    assert bound == pytest.approx(0.12 + 0.9 + 0.09 + 0.02)


def test_a_part_the_run_did_not_measure_is_refused_not_counted_as_free():
    parts = dict(PARTS)
    del parts["scan: secret prefilter"]
    with pytest.raises(KeyError):
        _bench().lower_bound(parts, cores=2, start=0.02)


def test_loading_the_bench_leaves_the_environment_as_it_was(monkeypatch):
    monkeypatch.delenv("BENCH_SMALL", raising=False)
    _bench()
    assert "BENCH_SMALL" not in os.environ


def test_the_scan_alone_reads_every_member_tarfile_wrote_and_writes_no_catalog(tarfile_archive):
    # the scan without the catalog: what vault's per-member work costs before a row is written anywhere
    path, names = tarfile_archive
    before = sorted(p.name for p in path.parent.iterdir())
    members, seconds = _bench().scan_alone(path)
    assert members == len(names) == 300
    assert seconds > 0
    assert sorted(p.name for p in path.parent.iterdir()) == before
