"""Member records into a shard file as they come: every field of every record, in order, whether the batch holds
only plain members (no raw name, link, sparse map or pieces: written with those columns as NULL literals) or
odd ones among them."""

from __future__ import annotations

import random

import pytest

from cloudvault.archive.scan import MemberRecord
from cloudvault.catalog import shards


def record(i: int, odd: bool) -> MemberRecord:
    rare = (b"caf\xe9", "target", b"t\xff", '[[0, 10]]', b"\x01" * 16) if odd else (None,) * 5
    return MemberRecord(f"runs/r{i:06d}.log", rare[0], "file", i, 0o644, 1_760_000_000 + i, 1000, 1000, "lab", "lab",
                        rare[1], 512 * i, 512 * i + 512, f"{i:064x}", rare[2], rare[3], rare[4])  # fmt: skip


@pytest.mark.parametrize("odd_every", [None, 1, 7, 2500])
def test_every_record_is_a_row_with_every_field_in_order(tmp_path, odd_every):
    records = [record(i, odd_every is not None and i % odd_every == 0) for i in range(5000)]
    random.Random(odd_every).shuffle(records)
    shard = shards.open_shard(str(tmp_path / "s.db"))
    with shards.MemberRows(shard) as rows:
        rows.add_all(iter(records))
    shards.finish_shard(shard)
    rows = shard.execute(f"SELECT {shards.MEMBER_COLUMNS} FROM members ORDER BY rowid").fetchall()
    shard.close()
    assert rows == [tuple(r) for r in records]
