"""What vault did with the mirror: restores (envs, docker images) and reproduction runs, written and read back.

Restore and repro write through these functions only; `vault show`, `vault runs` and `vault search` read them.
detail and summary are JSON documents; callers must never put a credential in them.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

from cloudvault.catalog.db import transaction
from cloudvault.catalog.rows import records_of
from cloudvault.record import record

Restore = record(
    "Restore", "id kind mirror_id entry_id name source source_hash target status detail started_at finished_at"
)
Run = record(
    "Run",
    "id run_id recipe recipe_hash mirror_id entry_id executor job_id folder status verdict summary started_at "
    "finished_at",
)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def record_restore(
    conn: sqlite3.Connection, *, kind: str, mirror_id: int | None, entry_id: str, name: str, source: str,
    source_hash: str | None, target: str, status: str, detail: dict, started_at: str,
) -> int:  # fmt: skip
    """One finished (or failed) restore; its row id."""
    with transaction(conn):
        cur = conn.execute(
            "INSERT INTO restores (kind, mirror_id, entry_id, name, source, source_hash, target, status, detail, "
            "started_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (kind, mirror_id, entry_id, name, source, source_hash, target, status,
             json.dumps(detail, sort_keys=True, default=str), started_at, now()),
        )  # fmt: skip
    return cur.lastrowid


def _select(conn: sqlite3.Connection, cls, table: str, order: str, filters: dict) -> list:
    """Rows of table where every given (not None) column equals its value, as cls (its fields by column name)."""
    given = {column: value for column, value in filters.items() if value is not None}
    where = "".join(f" AND {column} = ?" for column in given)
    columns = ", ".join(cls._fields)
    sql = f"SELECT {columns} FROM {table} WHERE 1=1{where} ORDER BY {order}"
    return records_of(cls, conn.execute(sql, list(given.values())))


def restores(conn: sqlite3.Connection, *, mirror_id: int | None = None, entry_id: str | None = None,
             kind: str | None = None) -> list[Restore]:  # fmt: skip
    return _select(conn, Restore, "restores", "id", {"mirror_id": mirror_id, "entry_id": entry_id, "kind": kind})


def start_run(
    conn: sqlite3.Connection, *, run_id: str, recipe: str, recipe_hash: str, mirror_id: int | None, entry_id: str,
    executor: str, folder: str, status: str = "running", job_id: str | None = None,
) -> int:  # fmt: skip
    """A run as soon as it exists (so `vault runs` shows it queued or running); its row id."""
    with transaction(conn):
        cur = conn.execute(
            "INSERT INTO runs (run_id, recipe, recipe_hash, mirror_id, entry_id, executor, job_id, folder, status, "
            "started_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (run_id, recipe, recipe_hash, mirror_id, entry_id, executor, job_id, folder, status, now()),
        )
    return cur.lastrowid


def finish_run(
    conn: sqlite3.Connection, run_id: str, *, status: str, verdict: str | None = None, summary: dict | None = None,
    requests: list[tuple[str, str, int | None, dict]] | None = None, job_id: str | None = None,
) -> None:  # fmt: skip
    """A run's outcome; requests: (request, verdict, first divergent token index, detail) per compared request."""
    with transaction(conn):
        row = conn.execute("SELECT id FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        done = None if status in ("queued", "running") else now()
        conn.execute(
            "UPDATE runs SET status = ?, verdict = COALESCE(?, verdict), summary = COALESCE(?, summary), "
            "job_id = COALESCE(?, job_id), finished_at = ? WHERE id = ?",
            (status, verdict, json.dumps(summary, sort_keys=True, default=str) if summary is not None else None,
             job_id, done, row[0]),
        )  # fmt: skip
        if requests is not None:
            conn.execute("DELETE FROM run_requests WHERE run_id = ?", (row[0],))
            conn.executemany(
                "INSERT INTO run_requests (run_id, request, verdict, first_divergence, detail) VALUES (?,?,?,?,?)",
                [(row[0], r, v, i, json.dumps(d, sort_keys=True, default=str)) for r, v, i, d in requests],
            )


def runs(conn: sqlite3.Connection, *, mirror_id: int | None = None, entry_id: str | None = None,
         run_id: str | None = None) -> list[Run]:  # fmt: skip
    scope = {"mirror_id": mirror_id, "entry_id": entry_id, "run_id": run_id}
    return _select(conn, Run, "runs", "started_at, id", scope)


def run_requests(conn: sqlite3.Connection, run_id: str) -> list[tuple[str, str, int | None, dict]]:
    rows = conn.execute(
        "SELECT q.request, q.verdict, q.first_divergence, q.detail FROM run_requests q JOIN runs r ON r.id = q.run_id "
        "WHERE r.run_id = ? ORDER BY q.request",
        (run_id,),
    )
    return [(r, v, i, json.loads(d)) for r, v, i, d in rows]
