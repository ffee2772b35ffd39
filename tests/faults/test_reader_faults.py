"""Every file vault reads that a person or a crash can damage ends, damaged, in one line naming that file (exit 5),
never a traceback; and an exception no check foresaw is a bug, exit 70 with its traceback, never exit 1."""

from __future__ import annotations

import json
import shutil

import pytest
from cli.test_index_slurm import _write_plan

from cloudvault.index.slurm import Layout

RECORD = "014_ss20_temp0_chunk1024/data/20260925_070231"


def _one_line(r, tally, code: int = 5) -> None:
    tally("traceback", int("Traceback" in r.err))
    assert r.code == code and r.err.startswith("vault: error: ") and r.err.count("\n") == 1, (r.code, r.err)
    assert "Traceback" not in r.err


def _csv_edit(text: str, kind: str) -> bytes:
    lines = text.splitlines()
    header, first = lines[0].split(","), lines[1].split(",")
    col = header.index("ttft_s")
    if kind == "no doc_id column":
        return "\n".join(",".join(c for i, c in enumerate(r.split(",")) if i != 1) for r in lines).encode()
    if kind == "short row":
        return "\n".join([lines[0], ",".join(first[:3]), *lines[2:]]).encode()
    if kind == "non-UTF-8":
        return text.encode().replace(b"measured", b"measur\xff\xfe", 1)
    first[col] = {"non-numeric": "fast", "NaN": "nan", "inf": "inf"}[kind]
    return "\n".join([lines[0], ",".join(first), *lines[2:]]).encode()


def _jsonl_edit(text: str, kind: str) -> bytes:
    lines = text.splitlines()
    doc = json.loads(lines[0])
    bad = {"cut short": lines[0][: len(lines[0]) // 2], "an array": "[1, 2, 3]",
           "output_ids not a list": json.dumps({**doc, "output_ids": "140399 43269"}),
           "output_ids of strings": json.dumps({**doc, "output_ids": ["a", "b"]}),
           "t_start a string": json.dumps({**doc, "t_start": "soon"}), "NaN": lines[0].replace("1790287351.0", "NaN"),
           "no request": json.dumps({k: v for k, v in doc.items() if k != "request"}),
           "non-UTF-8": None}[kind]  # fmt: skip
    if bad is None:
        return text.encode().replace(b'"request"', b'"req\xffuest"', 1)
    return "\n".join([bad, *lines[1:]]).encode()


CSV_KINDS = ["no doc_id column", "short row", "non-UTF-8", "non-numeric", "NaN", "inf"]
JSONL_KINDS = ["cut short", "an array", "output_ids not a list", "output_ids of strings", "t_start a string", "NaN",
               "no request", "non-UTF-8"]  # fmt: skip


@pytest.mark.parametrize(("name", "kind"), [("per_request.csv", k) for k in CSV_KINDS]
                         + [("requests.jsonl", k) for k in JSONL_KINDS])  # fmt: skip
def test_compare_on_a_damaged_result_file_is_one_line_naming_it(demo_mirror, demo_catalog, vault, tmp_path, name,
                                                                kind, tally):  # fmt: skip
    run = tmp_path / "run"
    shutil.copytree(demo_mirror / RECORD, run)
    edit = _csv_edit if name == "per_request.csv" else _jsonl_edit
    (run / name).write_bytes(edit((run / name).read_text(), kind))
    tally("corruption")
    r = vault("--catalog", str(demo_catalog), "compare", "014", str(run))
    _one_line(r, tally)
    assert f"{run / name}:" in r.err, r.err


def test_a_damaged_provenance_json_is_one_line_for_compare_and_runs(demo_mirror, demo_catalog, vault, tmp_path,
                                                                    tally):  # fmt: skip
    from cloudvault.catalog.db import open_catalog
    from cloudvault.catalog.records import start_run

    run = tmp_path / "014-run"
    shutil.copytree(demo_mirror / RECORD, run / "work")
    for text in ('{"run_id": "x", "status": ', '["a list"]', '{"run_id": 7, "status": "queued"}'):
        (run / "provenance.json").write_text(text)
        tally("corruption")
        r = vault("--catalog", str(demo_catalog), "compare", "014", str(run))
        _one_line(r, tally)
        assert f"{run / 'provenance.json'}:" in r.err
    conn = open_catalog(demo_catalog)
    start_run(conn, run_id="014-run", recipe="014_ss20_temp0", recipe_hash="0", mirror_id=1,
              entry_id="014_ss20_temp0_chunk1024", executor="slurm", folder=str(run))  # fmt: skip
    conn.execute("UPDATE runs SET status = 'queued', job_id = '999999' WHERE run_id = '014-run'")
    conn.close()
    tally("corruption")
    r = vault("--catalog", str(demo_catalog), "runs", "collect")  # a listing only reads; collect reads provenance
    tally("traceback", int("Traceback" in r.err))
    assert "Traceback" not in r.err and "provenance.json" in r.err and r.err.count("\n") == 1, r.err


@pytest.mark.parametrize(("name", "text"), [
    ("plan.json", '{"version": 1, "hash": "'), ("plan.json", '{"version": "1", "hash": 2, "tasks": {}}'),
    ("plan.json", "[]"), ("jobs.json", '{"plan": '), ("jobs.json", '{"plan": "x", "array": 45}'),
    ("merged.json", "not json"), ("merged.json", '{"plan": ["x"]}'),
])  # fmt: skip
def test_a_damaged_slurm_index_file_is_one_line_naming_it(tmp_path, vault, name, text, tally):
    from cli.test_index_slurm import _mirror

    db = tmp_path / "c.db"
    plan = _write_plan(db, _mirror(tmp_path), 2)
    lay = Layout(db)
    if name != "plan.json":
        (lay.folder / name).write_text(text)
        assert plan["hash"]
    else:
        lay.plan.write_text(text)
    tally("corruption")
    readers = ["status", "resume"] + (["merge"] if name != "jobs.json" else [])  # a merge needs no jobs.json
    for argv in (["index", "slurm", verb] for verb in readers):
        r = vault("--catalog", str(db), *argv)
        _one_line(r, tally)
        assert f"{lay.folder / name}:" in r.err, (argv, r.err)


def test_an_unforeseen_exception_is_a_bug_exit_70_with_its_traceback(demo_catalog, vault, monkeypatch, tally):
    import cloudvault.cli.search as search

    def broken(args):
        raise KeyError("a bug")

    monkeypatch.setattr(search, "run", broken)
    r = vault("--catalog", str(demo_catalog), "search", "granite")
    assert r.code == 70 and "Traceback" in r.err and "KeyError" in r.err
    assert r.err.strip().splitlines()[-1].startswith("vault: error: a bug in vault (KeyError")
