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


def test_the_demo_s_images_are_the_same_bytes_whatever_busybox_the_host_has(tmp_path, monkeypatch):
    # the README shows `vault verify`'s bytes of the demo mirror: a newcomer without busybox-static and a machine
    # with it (another distribution's binary, or none) must see the same figures
    from cloudvault.demo import images

    built = []
    for host_busybox in (None, b"\x7fELF a static busybox of one distribution", b"\x7fELF another, larger" * 99):
        monkeypatch.setattr(images, "busybox_static", lambda found=host_busybox: found)
        tree = tmp_path / str(len(built))
        images.build(tree)
        built.append({p.relative_to(tree): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()})
    assert built[0] == built[1] == built[2]
    assert len(built[0]) == 5  # three images, SHA256SUMS, README.md


def test_an_image_the_tests_run_has_the_host_s_busybox(monkeypatch):
    from cloudvault.demo import images

    monkeypatch.setattr(images, "busybox_static", lambda: b"\x7fELF static busybox")
    assert b"\x7fELF static busybox" in images.demo_image("neo", runnable=True)
    assert b"\x7fELF static busybox" not in images.demo_image("neo")
