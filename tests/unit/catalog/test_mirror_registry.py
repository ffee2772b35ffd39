"""The per-user mirror registry: every root any catalog indexed, rewritten whole under its lock."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from cloudvault import config
from cloudvault.catalog import mirror_registry
from cloudvault.catalog.mirror_guard import WriteIntoMirror, refuse_write_into_mirror
from cloudvault.catalog.mirror_registry import RegistryDamaged, forget, record, registered


def test_the_registry_lives_in_the_xdg_state_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_STATE_HOME")
    assert config.mirror_registry_path() == os.path.expanduser("~/.local/state/cloudvault/mirrors.tsv")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert config.mirror_registry_path() == str(tmp_path / "state/cloudvault/mirrors.tsv")


def test_a_root_is_recorded_once_per_catalog_and_forgotten_for_that_catalog_only(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    assert registered() == []
    record(a, [("/m/one", "one"), ("/m/two", "two")])
    record(a, [("/m/one", "one")])  # indexed again: brought up to date, not doubled
    record(b, [("/m/one", "one")])
    rows = registered()
    assert [(r.root, r.catalog) for r in rows] == [("/m/one", str(a)), ("/m/two", str(a)), ("/m/one", str(b))]
    forget([("/m/one", a)])
    assert [(r.root, r.catalog) for r in registered()] == [("/m/two", str(a)), ("/m/one", str(b))]


def test_the_file_is_private_whole_and_leaves_no_temp(tmp_path):
    record(tmp_path / "c.db", [("/m/one", "one")])
    path = config.mirror_registry_path()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    lines = Path(path).read_text().splitlines()
    assert len(lines) == 2 and lines[1].split("\t")[:3] == ["/m/one", "one", str(tmp_path / "c.db")]
    assert sorted(os.listdir(os.path.dirname(path))) == ["mirrors.tsv", "mirrors.tsv.lock"]


@pytest.mark.parametrize(
    "root", ["/m/tab\there", "/m/new\nline\rcr", "/m/back\\slash\\t", "/m/not-utf8-\udcff", "/m/x\\"]
)
def test_any_root_a_file_system_allows_reads_back_as_it_was_written(tmp_path, root):
    record(tmp_path / "c.db", [(root, "odd\tname"), ("/m/plain", "plain")])
    assert [(r.root, r.name) for r in registered()] == [(root, "odd\tname"), ("/m/plain", "plain")]


def test_writers_at_once_lose_no_record(tmp_path):
    """Two indexers on two catalogs record at the same moment: the lock keeps every root."""
    threads = [threading.Thread(target=record, args=(tmp_path / f"{i}.db", [(f"/m/{i}", str(i))])) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.root for r in registered()) == sorted(f"/m/{i}" for i in range(16))


@pytest.mark.parametrize(
    "text", ["{not json", "[]", "\udcff", mirror_registry.HEADER, mirror_registry.HEADER + "\n/m\tm\n"]
)
def test_a_damaged_registry_is_one_line_and_the_guard_refuses_rather_than_guess(tmp_path, text):
    path = config.mirror_registry_path()
    os.makedirs(os.path.dirname(path))
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(text)
    with pytest.raises(RegistryDamaged) as caught:
        registered()
    assert path in caught.value.message and "\n" not in caught.value.message
    with pytest.raises(RegistryDamaged):
        refuse_write_into_mirror(None, tmp_path / "out", "extract -o")


def test_the_guard_refuses_a_root_only_the_registry_knows(tmp_path):
    mirror = tmp_path / "m"
    mirror.mkdir()
    mirror_registry.record(tmp_path / "gone.db", [(str(mirror), "m")])
    with pytest.raises(WriteIntoMirror):
        refuse_write_into_mirror(None, mirror / "sub/out", "extract -o")
    refuse_write_into_mirror(None, tmp_path / "out", "extract -o")
