"""Search, show and ls as users run them against the demo mirror's catalog."""

from __future__ import annotations

import json
import subprocess
import sys

from cloudvault.catalog.query import fts_query


def test_search_granite_finds_004_and_012_with_their_cautions(demo_catalog, vault):
    r = vault("--catalog", str(demo_catalog), "search", "granite")
    assert r.code == 0
    assert "004_granite_30b_batch_sweep" in r.out and "012_granite_medium20_sparsespec_b1" in r.out
    assert "LOG_SS=2 inflates TPOT and E2E: do not use" in r.out


def test_search_lines_name_entries_whole_and_paths_once(demo_catalog, vault):
    """Entry IDs are never cut short, and a path that starts with its entry is not preceded by it again."""
    out = vault("--catalog", str(demo_catalog), "search", "granite").out.splitlines()
    files = out[out.index("files (6)") + 1 :]
    assert files[0] == "  004_granite_30b_batch_sweep/ENVIRONMENT.md  181 B"
    assert not any(line.split()[0] == "004_granite_" for line in out if line.strip())
    members = vault("--catalog", str(demo_catalog), "search", "accept_meta", "--kind", "member").out.splitlines()
    assert "  dumps/accept_meta.json  33 B  in 018_aicluster_breakdown_debugger/data/accept_g07.tar.zst" in members


def test_search_json_results_carry_the_documented_fields(demo_catalog, vault):
    r = vault("--catalog", str(demo_catalog), "search", "--json", "run10")
    doc = json.loads(r.out)
    members = [h for h in doc["results"] if h["kind"] == "member"]
    assert members
    for hit in members:
        assert {"entry", "kind", "path", "archive", "size", "blake3"} <= hit.keys()
        assert hit["archive"].endswith(".tar.zst") and len(hit["blake3"] or "x" * 64) == 64
    entries = {h["entry"] for h in doc["results"]}
    assert "019_aicluster_dump_debugger" in entries


def test_search_matches_inside_names_and_filters_by_entry_and_kind(demo_catalog, vault):
    db = str(demo_catalog)
    assert "gra_ss_b16r64_20260920_231502" in vault("--catalog", db, "search", "b16r64").out
    r = vault("--catalog", db, "search", "670bf1c4", "--json")
    assert any(h["entry"].startswith("014") for h in json.loads(r.out)["results"])
    r = json.loads(vault("--catalog", db, "search", "accept", "--entry", "018", "--kind", "member", "--json").out)
    assert r["results"] and all(h["entry"].startswith("018") and h["kind"] == "member" for h in r["results"])
    assert vault("--catalog", db, "search", "no-such-thing-anywhere").code == 1
    assert vault("--catalog", db, "search", "x", "--kind", "bogus").code == 2


def test_search_finds_every_member_that_grep_finds_in_the_listings(demo_catalog, demo_mirror, vault):
    grep = subprocess.run(
        ["grep", "-rih", "--include=*.tar.zst.list", "scores", str(demo_mirror)], capture_output=True, text=True
    )
    listed = {line.removeprefix("./").rstrip("/") for line in grep.stdout.splitlines()}
    r = json.loads(
        vault("--catalog", str(demo_catalog), "search", "scores", "--kind", "member", "--limit", "0", "--json").out
    )
    assert {h["path"] for h in r["results"]} == listed
    assert len(r["results"]) == len(grep.stdout.splitlines())


def test_short_terms_fall_back_to_substring_scan(demo_catalog, vault):
    r = json.loads(vault("--catalog", str(demo_catalog), "search", "b8", "--json").out)
    assert any("b8" in h["path"].lower() for h in r["results"])
    assert fts_query(["ab"]) is None and fts_query(['a"bc']) == '"a""bc"'


def test_entry_ids_resolve_by_unique_prefix(demo_catalog, vault):
    db = str(demo_catalog)
    r = vault("--catalog", db, "show", "014")
    assert r.code == 0 and "8246fb6" in r.out and "SSPEC_MAX_VERIFY_KV" in r.out
    amb = vault("--catalog", db, "show", "01")
    assert amb.code == 4 and "010_aime_kv_pruning" in amb.err
    missing = vault("--catalog", db, "show", "099")
    assert missing.code == 3 and missing.err.startswith("vault: error:") and missing.err[-1] == "\n"
    shown = json.loads(vault("--catalog", db, "show", "014_ss20_temp0", "--json").out)
    assert shown["settings"]["totals"]["output_tokens"] == 93790
    assert shown["settings"]["env"]["SSPEC_FIXED_OUTPUT"] == "8192"


def test_ls_lists_files_and_members_with_hashes(demo_catalog, vault):
    r = vault("--catalog", str(demo_catalog), "ls", "018", "dumps/*.json", "--json")
    hits = json.loads(r.out)["results"]
    assert hits and all(h["path"].startswith("dumps/") and h["path"].endswith(".json") for h in hits)
    assert {h["archive"].rsplit("/", 1)[-1] for h in hits} >= {"breakdown_b8_n81.tar.zst", "compaction_n84.tar.zst"}
    plain = json.loads(vault("--catalog", str(demo_catalog), "ls", "014", "data/*/per_request.csv", "--json").out)
    assert [h["path"] for h in plain["results"]] == [  # the first run, and its rep2 (a GLOB's * spans folders)
        "data/20260925_070231/per_request.csv", "data/ss20_temp0_c1024_rep2/20260925_072725/per_request.csv"]
    assert vault("--catalog", str(demo_catalog), "ls", "014", "nothing*").code == 1


def test_missing_catalog_is_a_clear_error(tmp_path, vault):
    r = vault("--catalog", str(tmp_path / "none.db"), "search", "granite")
    assert r.code == 3 and "vault index" in r.err


def test_search_and_extract_processes_do_not_import_typer_rich_or_dataclasses(demo_catalog, tmp_path):
    for args in (["search", "granite"], ["extract", "018", "compaction_meta.json", "-o", str(tmp_path)]):
        code = (
            f"import sys; from cloudvault.cli.main import main; main(['--catalog', sys.argv[1], *{args!r}]);"
            "print('LOADED', [m for m in ('typer', 'rich', 'click', 'dataclasses') if m in sys.modules])"
        )
        out = subprocess.run([sys.executable, "-c", code, str(demo_catalog)], capture_output=True, text=True)
        assert "LOADED []" in out.stdout, (args, out.stderr)


def test_help_explains_every_command(vault):
    r = subprocess.run([sys.executable, "-m", "cloudvault", "--help"], capture_output=True, text=True)
    for cmd in ("index", "search", "show", "ls", "demo"):
        assert cmd in r.stdout
    assert "exit codes" in r.stdout
