"""`vault demo`: build the demo mirror, index it into its own catalog, and walk the users' journeys."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from cloudvault import config, errors
from cloudvault.cli.extract import run_extract
from cloudvault.cli.index import run_index
from cloudvault.cli.search import run_search
from cloudvault.cli.show import run_ls, run_show
from cloudvault.cli.ui import UI
from cloudvault.cli.verify import run_optimize, run_verify
from cloudvault.demo.build import build_demo


def run_demo(catalog: str | None, directory: str | None, as_json: bool) -> int:
    dest = Path(directory).expanduser() if directory else config.data_home() / "cloudvault" / "demo"
    ui = UI(as_json=as_json)
    started = time.monotonic()
    root = build_demo(dest)
    db = Path(catalog) if catalog else dest / "catalog.db"
    out = dest / "extracted"

    def extract(member):
        return lambda: run_extract(str(db), "018", member(), str(out), "breakdown", False, True, False, as_json)

    ui.line(f"built the demo mirror at {root} in {time.monotonic() - started:.1f} s")
    journeys = [
        ("index", lambda: run_index(str(db), [str(root)], "marvell_cloud", None, False, False, as_json)),
        ("search granite", lambda: run_search(str(db), ["granite"], None, [], 20, as_json)),
        ("show 014", lambda: run_show(str(db), "014", as_json)),
        ("ls 018 'dumps/*.json'", lambda: run_ls(str(db), "018", "dumps/*.json", as_json)),
        ("search HF_TOKEN", lambda: run_search(str(db), ["HF_TOKEN"], None, [], 5, as_json)),
        ("extract 018 <the last member of breakdown_b8_n81.tar.zst>", extract(lambda: _last_member(db))),
        ("optimize 018", lambda: run_optimize(str(db), "018", None, None, False, as_json)),
        ("extract 018 <the same member, now from the seekable copy>", extract(lambda: _last_member(db))),
        ("verify --sample 20%", lambda: run_verify(str(db), None, "20%", 1, as_json)),
    ]
    code = errors.OK
    for label, journey in journeys:
        ui.line()
        ui.heading(f"$ vault --catalog {shlex.quote(str(db))} {label}" + (f" {root}" if label == "index" else ""))
        result = journey()
        if label == "index" and result != errors.OK:
            code = result
    ui.line()
    ui.line(f"try it yourself: export VAULT_CATALOG={shlex.quote(str(db))}; vault search b16r64")
    return code


def _last_member(db: Path) -> str:
    """The file member stored last in the single-frame demo archive: the worst case for a plain extract."""
    import sqlite3

    conn = sqlite3.connect(db)
    row = conn.execute(
        "SELECT m.path FROM members m JOIN archives a ON a.id = m.archive_id JOIN files f ON f.id = a.file_id "
        "WHERE f.path LIKE '%breakdown_b8_n81.tar.zst' AND m.type = 'file' ORDER BY m.data_offset DESC LIMIT 1"
    ).fetchone()
    conn.close()
    return row[0]
