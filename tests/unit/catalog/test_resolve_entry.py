"""resolve_entry, the first lookup of show, ls, extract, search and verify: an entry named exactly wins over the
entries it is a prefix of, a unique prefix names one, more are ambiguous; answered by one query (the entries are
read whole either way: no index serves a prefix, nor an ID without its mirror)."""

from __future__ import annotations

import pytest

from cloudvault.catalog.db import open_catalog
from cloudvault.catalog.query import resolve_entry
from cloudvault.errors import AmbiguousEntry, EntryNotFound


@pytest.fixture
def conn(tmp_path):
    conn = open_catalog(tmp_path / "c.db", create=True)
    conn.executemany("INSERT INTO mirrors(id, name, root) VALUES (?, ?, ?)", [(1, "lab", "/m/lab"), (2, "b", "/m/b")])
    rows = [(1, "01"), (1, "018"), (1, "018b"), (1, "020_Big"), (2, "020_big"), (2, "030"), (1, "")]
    conn.executemany("INSERT INTO entries(mirror_id, entry_id) VALUES (?, ?)", rows)
    yield conn
    conn.close()


def test_an_exact_id_wins_over_the_ids_it_is_a_prefix_of(conn):
    assert resolve_entry(conn, "01") == (1, "01", "lab")
    assert resolve_entry(conn, "018") == (1, "018", "lab")
    assert resolve_entry(conn, "018b/") == (1, "018b", "lab")  # shell completion's slash


def test_a_unique_prefix_names_one_and_a_shared_one_is_ambiguous_in_id_order(conn):
    assert resolve_entry(conn, "03") == (2, "030", "b")
    with pytest.raises(AmbiguousEntry) as caught:
        resolve_entry(conn, "02")
    assert caught.value.fields["candidates"] == "lab:020_Big, b:020_big"


def test_an_id_of_two_mirrors_is_ambiguous_unless_its_mirror_is_named(conn):
    conn.execute("INSERT INTO entries(mirror_id, entry_id) VALUES (2, '018')")
    with pytest.raises(AmbiguousEntry):
        resolve_entry(conn, "018")
    assert resolve_entry(conn, "b:018") == (2, "018", "b")
    assert resolve_entry(conn, "lab:018") == (1, "018", "lab")


def test_an_exact_id_is_case_sensitive_and_a_prefix_is_not(conn):
    conn.execute("DELETE FROM entries WHERE mirror_id = 2")
    assert resolve_entry(conn, "020_Big") == (1, "020_Big", "lab")
    assert resolve_entry(conn, "020_b") == (1, "020_Big", "lab")  # LIKE: ASCII case-insensitive, as it was


def test_nothing_named_is_not_found_and_the_mirror_root_is_no_entry(conn):
    with pytest.raises(EntryNotFound):
        resolve_entry(conn, "9")
    with pytest.raises(EntryNotFound):
        resolve_entry(conn, "018_")  # _ is itself, not LIKE's any-character
    with pytest.raises(AmbiguousEntry) as caught:
        resolve_entry(conn, "")  # a prefix of every entry; the mirror's root ('') is none of them
    assert caught.value.fields["count"] == 6


def test_one_query_answers_an_exact_id_and_a_prefix(conn):
    for named in ("018", "03"):
        statements = []
        conn.set_trace_callback(statements.append)
        resolve_entry(conn, named)
        conn.set_trace_callback(None)
        assert len(statements) == 1, statements
