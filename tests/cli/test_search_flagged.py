"""`vault search` says what it searched, and `vault search --flagged` lists flagged objects across the mirror."""

from __future__ import annotations

import json
import sqlite3

SECRET = "019_aicluster_dump_debugger:data/saturate_logs_n61.tar.zst::logs/saturate_env.log"


def test_search_says_it_searched_names_and_the_text_of_n_documents(demo_catalog, vault):
    docs = sqlite3.connect(demo_catalog).execute("SELECT count(*) FROM docs").fetchone()[0]
    line = f"searched names, and the text of {docs} documents; `vault grep` searches inside files"
    hit = vault("--catalog", str(demo_catalog), "search", "granite")
    assert hit.out.splitlines()[-1] == line
    miss = vault("--catalog", str(demo_catalog), "search", "accept_len=4")
    assert miss.code == 1 and line in miss.out
    entry_docs = sqlite3.connect(demo_catalog).execute(
        "SELECT count(*) FROM docs d JOIN files f ON f.id = d.file_id WHERE f.entry_id LIKE '019%'").fetchone()[0]
    scoped = vault("--catalog", str(demo_catalog), "search", "HF_TOKEN", "--entry", "019")
    assert f"the text of {entry_docs} documents" in scoped.out


def test_search_flagged_lists_every_flag_across_the_mirror_never_a_value(demo_catalog, vault):
    conn = sqlite3.connect(demo_catalog)
    rows = conn.execute("SELECT kind, detail FROM flags ORDER BY entry_id").fetchall()
    r = vault("--catalog", str(demo_catalog), "search", "--flagged")
    assert r.code == 0
    assert any(line.split()[0] == SECRET and "secret" in line and "value not stored" in line
               for line in r.out.splitlines())  # fmt: skip
    assert sum(1 for line in r.out.splitlines() if line.strip() and not line.startswith("flag")) == len(rows)
    only = vault("--catalog", str(demo_catalog), "search", "--flagged", "secret", "--json")
    docs = json.loads(only.out)["flags"]
    assert docs and all(d["kind"] == "secret" for d in docs)
    assert {"entry", "path", "archive", "member", "kind", "detail"} <= docs[0].keys()
    none = vault("--catalog", str(demo_catalog), "search", "--flagged", "no_such_kind")
    assert none.code == 1


def test_search_without_terms_or_flagged_is_a_usage_error(demo_catalog, vault):
    assert vault("--catalog", str(demo_catalog), "search").code == 2
