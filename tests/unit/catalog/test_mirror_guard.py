"""The mirror guard's one question, `mirror_holding(path, roots)`: is path inside (or is it) one of the roots, with
links followed on both sides; and what answering it costs, since every `vault extract -o` asks it of every root
the per-user registry has ever recorded."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudvault.catalog import mirror_guard, mirror_registry
from cloudvault.catalog.mirror_guard import mirror_holding
from cloudvault.catalog.mirror_registry import record, registered, registered_roots


@pytest.fixture
def mirror(tmp_path):
    root = tmp_path / "m"
    (root / "018/data").mkdir(parents=True)
    return root


def test_a_path_inside_a_root_or_the_root_itself_is_held_and_a_sibling_with_its_prefix_is_not(mirror, tmp_path):
    (tmp_path / "m2").mkdir()
    roots = [str(tmp_path / "elsewhere"), str(mirror)]
    assert mirror_holding(mirror, roots) == str(mirror)
    assert mirror_holding(mirror / "018/data", roots) == str(mirror)
    assert mirror_holding(mirror / "018/not-yet/deeper", roots) == str(mirror)
    assert mirror_holding(tmp_path / "m2", roots) is None
    assert mirror_holding(tmp_path / "m2/new", roots) is None
    assert mirror_holding(tmp_path, roots) is None


def test_links_are_followed_on_both_sides(mirror, tmp_path, monkeypatch):
    (tmp_path / "link-to-mirror").symlink_to(mirror)
    (tmp_path / "link-into-data").symlink_to(mirror / "018/data")
    assert mirror_holding(tmp_path / "link-into-data", [str(mirror)]) == str(mirror)
    assert mirror_holding(tmp_path / "link-into-data/new", [str(mirror)]) == str(mirror)
    assert mirror_holding(mirror / "018", [str(tmp_path / "link-to-mirror")]) == str(tmp_path / "link-to-mirror")
    assert mirror_holding(f"{mirror}/../m/018", [str(mirror)]) == str(mirror)
    monkeypatch.chdir(mirror / "018")
    assert mirror_holding(".", [str(mirror)]) == str(mirror)


def test_a_root_that_is_gone_holds_only_paths_that_are_not_there_either(mirror, tmp_path):
    gone = str(tmp_path / "gone/mirror")
    assert mirror_holding(tmp_path / "gone/mirror/018", [gone]) == gone
    assert mirror_holding(gone, [gone]) == gone
    assert mirror_holding(mirror / "018", [gone]) is None
    assert mirror_holding(tmp_path / "gone", [gone]) is None


def test_remote_roots_are_left_out_and_file_urls_are_local(mirror):
    assert mirror_holding(mirror / "018", ["s3://bucket/m", "ssh://host/m"]) is None
    assert mirror_holding(mirror / "018", [f"file://{mirror}"]) == f"file://{mirror}"


def test_the_path_is_resolved_once_however_many_roots_there_are(mirror, tmp_path, monkeypatch):
    """Every `vault extract -o` asks this of every root the registry ever recorded (hundreds, after a while): an
    existing path is resolved once and each root costs one stat, not a walk of its folders (os.path.realpath)."""
    roots = [str(tmp_path / f"other{i}/mirror") for i in range(50)] + [str(mirror)]
    for root in roots[:25]:
        os.makedirs(root)
    calls = []
    realpath = os.path.realpath
    monkeypatch.setattr(mirror_guard.os.path, "realpath", lambda p, **kw: calls.append(p) or realpath(p, **kw))
    assert mirror_holding(mirror / "018", roots) == str(mirror)
    assert mirror_holding(tmp_path, roots) is None
    assert len(calls) == 2


@pytest.mark.parametrize(
    "root", ["/m/tab\there", "/m/new\nline\rcr", "/m/back\\slash\\t", "/m/not-utf8-\udcff", "/m/x\\"]
)
def test_the_guard_reads_each_registered_root_as_it_was_written(tmp_path, root):
    record(tmp_path / "c.db", [(root, "odd\tname"), ("/m/plain", "plain")])
    record(tmp_path / "d.db", [(root, "again")])
    assert registered_roots() == [root, "/m/plain"] == list(dict.fromkeys(r.root for r in registered()))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="\\tnrx\t\r a\udcff", max_size=16))
def test_a_field_is_unescaped_as_a_regular_expression_would(field):
    """The registry's escapes undone left to right, as re.sub(r"\\\\(.)") undoes them (the reader once used it)."""
    want = re.sub(r"\\(.)", lambda m: mirror_registry._UNESCAPE.get(m.group(1), m.group(0)), field)
    assert mirror_registry._unescaped(field) == want
