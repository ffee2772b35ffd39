"""Restores and runs live in the catalog: `vault search` finds them and `vault show` lists them with the entry."""

from __future__ import annotations

import json

from cloudvault.catalog import records
from cloudvault.catalog.db import open_catalog
from cloudvault.catalog.query import resolve_entry


def test_a_recorded_restore_and_run_are_searchable_and_shown_with_their_entry(demo_catalog, vault):
    conn = open_catalog(demo_catalog)
    mirror_id, entry_015, _ = resolve_entry(conn, "015")
    _, entry_014, _ = resolve_entry(conn, "014")
    records.record_restore(
        conn, kind="env", mirror_id=mirror_id, entry_id=entry_015, name="sparsespec",
        source="015/data/miniforge3_tar/sparsespec.tar.zst", source_hash="ab" * 32, target="/opt/envs/sparsespec",
        status="ok", detail={"rewritten": 12}, started_at=records.now(),
    )  # fmt: skip
    records.start_run(conn, run_id="014_ss20_temp0-T1", recipe="014_ss20_temp0", recipe_hash="h",
                      mirror_id=mirror_id, entry_id=entry_014, executor="local", folder="/runs/T1")  # fmt: skip
    records.finish_run(conn, "014_ss20_temp0-T1", status="finished", verdict="DIVERGED", summary={"identical": 23},
                       requests=[("670bf1c4", "diverged", 1498, {}), ("a1", "identical", None, {})])  # fmt: skip
    conn.close()

    found = vault("--catalog", str(demo_catalog), "search", "restored", "sparsespec", "--json")
    hits = [h for h in json.loads(found.out)["results"] if h["kind"] == "restore"]
    assert found.code == 0 and hits and hits[0]["path"] == "/opt/envs/sparsespec" and hits[0]["entry"] == entry_015
    runs = vault("--catalog", str(demo_catalog), "search", "DIVERGED", "--kind", "run")
    assert runs.code == 0 and "014_ss20_temp0-T1" in runs.out

    shown = json.loads(vault("--catalog", str(demo_catalog), "show", "015", "--json").out)
    assert [r["name"] for r in shown["restores"]] == ["sparsespec"] and shown["restores"][0]["detail"][
        "rewritten"
    ] == 12
    text = vault("--catalog", str(demo_catalog), "show", "014").out
    assert "014_ss20_temp0-T1 (local): finished DIVERGED" in text

    conn = open_catalog(demo_catalog, readonly=True)
    assert records.run_requests(conn, "014_ss20_temp0-T1")[0] == ("670bf1c4", "diverged", 1498, {})
    assert records.runs(conn, entry_id=entry_014)[0].verdict == "DIVERGED"
    assert records.restores(conn, kind="docker") == []


def test_nothing_recorded_means_no_restore_or_run_hits(demo_catalog, vault):
    r = vault("--catalog", str(demo_catalog), "search", "restored", "--kind", "restore")
    assert r.code == 1
