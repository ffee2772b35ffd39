"""`vault demo`: it builds the demo mirror, indexes it and walks the journeys, as the README's first command runs it."""

from __future__ import annotations


def test_demo_builds_indexes_and_walks_the_journeys(tmp_path, vault):
    r = vault("demo", "--dir", str(tmp_path / "d"))
    assert r.code == 0, r.err
    assert "004_granite_30b_batch_sweep" in r.out and "8246fb6" in r.out
    assert "never share externally" in r.out
    assert (tmp_path / "d/catalog.db").exists()


def test_demo_json_is_the_documented_shape(tmp_path, vault):
    import json

    from tests.cli.json_shapes import check

    r = vault("demo", "--dir", str(tmp_path / "d"), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    check(doc, "demo.md", "demo")
    assert doc["catalog"] == str(tmp_path / "d/catalog.db") and doc["journeys"][0]["argv"][:1] == ["index"]
    shown = {tuple(j["argv"][:2]): j["output"] for j in doc["journeys"]}
    assert shown[("search", "granite")]["results"] and shown[("show", "014")]["entry"]
