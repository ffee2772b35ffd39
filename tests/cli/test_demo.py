"""`vault demo`: it builds the demo mirror, indexes it and walks the journeys, as the README's first command runs it."""

from __future__ import annotations


def test_demo_builds_indexes_and_walks_the_journeys(tmp_path, vault):
    r = vault("demo", "--dir", str(tmp_path / "d"))
    assert r.code == 0, r.err
    assert "004_granite_30b_batch_sweep" in r.out and "8246fb6" in r.out
    assert "never share externally" in r.out
    assert (tmp_path / "d/catalog.db").exists()
