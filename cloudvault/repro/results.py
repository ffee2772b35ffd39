"""A run's results as compare wants them: per-request rows keyed by request, read from a run folder on disk or
from a recorded folder in the mirror (through the catalog, every byte verified), with the settings it ran under.

A result folder holds per_request.csv (the harness's table) and, when recorded, requests.jsonl (per request:
output_ids, t_start, t_first, t_done, optionally top2_margin). Timings are recomputed from the timestamps with the
seed's formulas when they are there; otherwise the table's columns are used as recorded.
"""

from __future__ import annotations

import sqlite3
from collections import namedtuple
from pathlib import Path, PurePosixPath

from cloudvault.errors import UsageError
from cloudvault.readers import NUMBER, OPTIONAL, DamagedFile, csv_table, json_file, json_lines
from cloudvault.repro.metrics import request_timings, totals

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
        measured = [r for r in self.rows.values() if r.get("role", "measured") == "measured"]
        return totals(measured)


def request_key(row: dict) -> str:
    return f"{row['doc_id']}@gpu{row['gpu']}"


# what compare relies on in each line of requests.jsonl (readers.check_shape)
STREAM_SHAPE = {"required": ("request",), "request": str, "doc_id": (str, OPTIONAL), "gpu": (int, str, OPTIONAL),
                "output_ids": (list, OPTIONAL), "top2_margin": (list, OPTIONAL), "t_start": (*NUMBER, OPTIONAL),
                "t_first": (*NUMBER, OPTIONAL), "t_done": (*NUMBER, OPTIONAL)}  # fmt: skip
PROVENANCE_SHAPE = {"run_id": str, "status": str, "entry": (str, OPTIONAL), "settings": (dict, OPTIONAL),
                    "plan": (dict, OPTIONAL), "options": (dict, OPTIONAL), "exit_codes": (dict, OPTIONAL),
                    "job_id": (str, OPTIONAL)}  # fmt: skip


def parse(files: dict[str, bytes], where: str = "") -> dict[str, dict]:
    """The rows of a result folder's files, keyed by request (doc id @ GPU); a damaged file is DamagedFile
    naming it (where: the folder they came from)."""
    rows: dict[str, dict] = {}
    name = f"{where}/" if where else ""
    if TABLE in files:
        for row in csv_table(files[TABLE], f"{name}{TABLE}", ("doc_id", "gpu"), NUMERIC):
            if request_key(row) in rows:
                raise DuplicateRequest(path=f"{name}{TABLE}", request=request_key(row))
            rows[request_key(row)] = row
    seen: set[str] = set()
    for record in json_lines(files.get(STREAM, b""), f"{name}{STREAM}", STREAM_SHAPE):
        if record["request"] in seen:
            raise DuplicateRequest(path=f"{name}{STREAM}", request=record["request"])
        seen.add(record["request"])
        ids = record.get("output_ids")
        if ids is not None and not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
            raise DamagedFile(path=f"{name}{STREAM}", detail=f"request {record['request']}: output_ids holds "
                              "something other than token ids")  # fmt: skip
        row = rows.setdefault(record["request"], {"doc_id": record.get("doc_id"), "gpu": record.get("gpu")})
        row["output_ids"] = ids
        if "top2_margin" in record:
            row["top2_margin"] = record["top2_margin"]
        if all(record.get(k) is not None for k in ("t_start", "t_first", "t_done")) and ids:
            timing = request_timings(record["t_start"], record["t_first"], record["t_done"], len(ids))
            row.update({k: round(v, 3) for k, v in timing.items()})
    return rows


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
