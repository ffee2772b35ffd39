"""A run's results as compare wants them: per-request rows keyed by request, read from a run folder on disk or
from a recorded folder in the mirror (through the catalog, every byte verified), with the settings it ran under.

A result folder holds per_request.csv (the harness's table) and, when recorded, requests.jsonl (per request:
output_ids, t_start, t_first, t_done, optionally top2_margin). Timings are recomputed from the timestamps with the
seed's formulas when they are there; otherwise the table's columns are used as recorded.
"""

from __future__ import annotations

import sqlite3
from collections import namedtuple
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

import numpy as np

from cloudvault.errors import UsageError
from cloudvault.readers import NUMBER, OPTIONAL, DamagedFile, csv_table, json_file, json_lines
from cloudvault.repro.metrics import request_timings, run_totals, totals

TABLE, STREAM, PROVENANCE = "per_request.csv", "requests.jsonl", "provenance.json"
RESULT_FILES = (TABLE, STREAM)
NUMERIC = ("output_tokens", "prompt_tokens", "ttft_s", "tpot_ms", "e2e_s", "tps")


class DuplicateRequest(UsageError):
    """{path}: request {request} appears twice; each request id must be unique in a run (nothing was compared)"""


class Results(namedtuple("Results", "label rows settings where entry digest", defaults=(None, None))):
    """label: how the user named it; rows: request -> row; settings: what it ran under; where: folder or entry
    folder; entry: the entry it records or reproduces, when known; digest: of its result files (results.digest),
    which tells a copy of a run from another run."""

    __slots__ = ()

    def totals(self) -> dict:
        if hasattr(self.rows, "measured_mask"):
            found = _column_totals(self.rows)
            if found is not None:
                return found
        measured = [r for r in self.rows.values() if r.get("role", "measured") == "measured"]
        return totals(measured)


def _column_totals(table) -> dict | None:
    """totals of a run kept as columns, from its arrays; None where a measured request lacks a column (the row by
    row totals then fail as they always have)."""
    roles = table.texts.get("role")
    mask = np.array([r is None or r == "measured" for r in roles], bool) if roles is not None else None
    mask = np.ones(len(table), bool) if mask is None else mask
    out, e2e, ttft, tpot = (table.number(c)[mask] for c in ("output_tokens", "e2e_s", "ttft_s", "tpot_ms"))
    if any(np.isnan(c).any() for c in (out, e2e, ttft, tpot)):
        return None
    finish = table.texts.get("finish")
    hits = sum(1 for f, m in zip(finish, mask.tolist(), strict=True) if m and f == "cap") if finish else 0
    return run_totals(out, e2e, ttft, tpot, hits)


def request_key(row: dict) -> str:
    return f"{row['doc_id']}@gpu{row['gpu']}"


# what compare relies on in each line of requests.jsonl (readers.check_shape)
STREAM_SHAPE = {"required": ("request",), "request": str, "doc_id": (str, OPTIONAL), "gpu": (int, str, OPTIONAL),
                "output_ids": (list, OPTIONAL), "top2_margin": (list, OPTIONAL), "t_start": (*NUMBER, OPTIONAL),
                "t_first": (*NUMBER, OPTIONAL), "t_done": (*NUMBER, OPTIONAL)}  # fmt: skip
PROVENANCE_SHAPE = {"run_id": str, "status": str, "entry": (str, OPTIONAL), "settings": (dict, OPTIONAL),
                    "plan": (dict, OPTIONAL), "options": (dict, OPTIONAL), "exit_codes": (dict, OPTIONAL),
                    "job_id": (str, OPTIONAL)}  # fmt: skip


def parse(files: dict[str, bytes], where: str = "") -> Mapping[str, dict]:
    """The rows of a result folder's files, keyed by request (doc id @ GPU); a damaged file is DamagedFile
    naming it (where: the folder they came from). Kept as columns (columns.RequestTable) where the table allows."""
    name = f"{where}/" if where else ""
    rows = _table(files[TABLE], f"{name}{TABLE}") if TABLE in files else {}
    seen: set[str] = set()
    for record in json_lines(files.get(STREAM, b""), f"{name}{STREAM}", STREAM_SHAPE):
        if record["request"] in seen:
            raise DuplicateRequest(path=f"{name}{STREAM}", request=record["request"])
        seen.add(record["request"])
        ids = record.get("output_ids")
        if ids is not None and not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
            raise DamagedFile(path=f"{name}{STREAM}", detail=f"request {record['request']}: output_ids holds "
                              "something other than token ids")  # fmt: skip
        fields = {"output_ids": ids, **({"top2_margin": record["top2_margin"]} if "top2_margin" in record else {})}
        timing = {}
        if all(record.get(k) is not None for k in ("t_start", "t_first", "t_done")) and ids:
            timing = request_timings(record["t_start"], record["t_first"], record["t_done"], len(ids))
            timing = {k: round(v, 3) for k, v in timing.items()}
            if min(timing.values()) < 0:
                raise DamagedFile(path=f"{name}{STREAM}", detail=f"request {record['request']}: its timestamps go "
                                  "back (t_start <= t_first <= t_done is how time runs)")  # fmt: skip
        _lay_over(rows, record, fields, timing)
    if TABLE in files:
        _no_negative(rows, f"{name}{TABLE}")
    return rows


def _no_negative(rows: Mapping[str, dict], path: str) -> None:
    """Times, rates and token counts are never negative: one that is is DamagedFile naming its request."""
    for column in NUMERIC:
        if hasattr(rows, "numbers"):
            values = rows.numbers.get(column)
            bad = np.flatnonzero(values < 0) if values is not None else ()
            found = [(rows.requests[i], values[i]) for i in bad[:1]]
        else:
            found = [(k, r[column]) for k, r in rows.items() if (r.get(column) or 0) < 0]
        if found:
            raise DamagedFile(path=path, detail=f"request {found[0][0]}: {column} = {found[0][1]:g} is negative")


def _table(data: bytes, path: str) -> Mapping[str, dict]:
    """per_request.csv's rows: as columns when the one-pass reader takes the file, else by the validating reader
    (which names what is wrong)."""
    from cloudvault.repro.columns import from_csv

    table = from_csv(data, ("doc_id", "gpu"), NUMERIC)
    if table is not None:
        return table
    rows: dict[str, dict] = {}
    for row in csv_table(data, path, ("doc_id", "gpu"), NUMERIC):
        if request_key(row) in rows:
            raise DuplicateRequest(path=path, request=request_key(row))
        rows[request_key(row)] = row
    return rows


def _lay_over(rows, record: dict, fields: dict, timing: dict) -> None:
    """requests.jsonl's fields of one request over its row (a new row when the table has none)."""
    request = record["request"]
    if not hasattr(rows, "extra"):
        row = rows.setdefault(request, {"doc_id": record.get("doc_id"), "gpu": record.get("gpu")})
        row.update(fields)
        row.update(timing)
        return
    i = rows.index.get(request)
    if i is None:
        i = rows.add_request(request, {"doc_id": record.get("doc_id"), "gpu": record.get("gpu")})
    rows.extra.setdefault(i, {}).update(fields)
    for column, v in timing.items():
        rows.set_number(i, column, v)


def digest(files: dict[str, bytes]) -> str:
    """One hash over a result folder's files (their names and bytes): equal for a run and a copy of it."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for name in sorted(files):
        h.update(f"{name}\0{len(files[name])}\0".encode())
        h.update(files[name])
    return h.hexdigest()


def result_base(folder: Path) -> Path:
    """Where a folder's result files are: a vault run folder keeps them under work/."""
    return folder / "work" if (folder / PROVENANCE).is_file() and (folder / "work").is_dir() else folder


def read_folder(folder: Path) -> dict[str, bytes]:
    """The result files of a folder on disk (under work/ in a vault run folder)."""
    base = result_base(folder)
    return {name: (base / name).read_bytes() for name in RESULT_FILES if (base / name).is_file()}


def read_mirror(conn: sqlite3.Connection, mirror_id: int, entry_id: str, folder: str, names=RESULT_FILES) -> dict:
    """Files of a recorded folder, read through the catalog (plain files or archive members, BLAKE3-checked)."""
    from cloudvault.catalog.lookup import EntryMembers
    from cloudvault.io.members import MemberReader, read_order

    lookup = EntryMembers(conn, mirror_id, entry_id)
    base = PurePosixPath(folder.strip("/") or ".")
    wanted = {m: name for name in names for m in lookup.exact(str(base / name))}
    found: dict[str, bytes] = {}
    with MemberReader(conn) as reader:
        for member in read_order(wanted):
            found[wanted[member]] = b"".join(reader.open(member))
    return found


def provenance(folder: Path) -> dict:
    """A vault run folder's provenance.json ({} for other folders); a damaged one is DamagedFile, one line."""
    return json_file(folder / PROVENANCE, PROVENANCE_SHAPE, missing={})
