"""What `vault compare` and `vault repro` compare: a run folder on disk, a run id from the catalog, or an entry's
recorded folder in the mirror (`014` = the folder its repro recipe records, `014/data/<run>` = that folder)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from cloudvault.errors import NotFound, UsageError
from cloudvault.repro import results
from cloudvault.repro.recipe import Recipe
from cloudvault.repro.results import Results


class ResultsNotFound(NotFound):
    """no result files ({names}) in {where}"""


def recipes_for(entry_id: str) -> list[Recipe]:
    """The repro recipes that reproduce this entry (their entry is a prefix of its id)."""
    from cloudvault.recipe import recipe_names
    from cloudvault.repro.recipe import KIND, load

    found = []
    for name in recipe_names(KIND):
        recipe = load(name)
        if entry_id.startswith(recipe.entry):
            found.append(recipe)
    return found


def resolve(text: str, connect: Callable[[], sqlite3.Connection]) -> Results:
    """RUN_A or RUN_B as the user named it."""
    folder = Path(text).expanduser()
    if folder.is_dir():
        return _from_folder(text, folder)
    conn = connect()
    from cloudvault.catalog.records import runs

    recorded = runs(conn, run_id=text)
    if recorded:
        return _from_folder(text, Path(recorded[0].folder))
    return from_entry(conn, text)


def _from_folder(label: str, folder: Path) -> Results:
    files = results.read_folder(folder)
    if not files:
        raise ResultsNotFound(names=", ".join(results.RESULT_FILES), where=str(folder))
    prov = results.provenance(folder)
    rows = results.parse(files, str(results.result_base(folder)))
    return Results(label, rows, prov.get("settings"), str(folder), prov.get("entry"), results.digest(files))


def from_entry(conn: sqlite3.Connection, text: str, folder: str | None = None) -> Results:
    """An entry's recorded folder, read through the catalog; its settings are the entry's recorded ones."""
    from cloudvault.catalog.details import entry_details
    from cloudvault.catalog.query import resolve_entry

    head, _, rest = text.partition("/")
    mirror_id, entry_id, _ = resolve_entry(conn, head)
    folder = folder or rest.strip("/") or _recorded_folder(entry_id)
    files = results.read_mirror(conn, mirror_id, entry_id, folder)
    where = f"{entry_id}/{folder}"
    if not files:
        raise ResultsNotFound(names=", ".join(results.RESULT_FILES), where=where)
    settings = entry_details(conn, mirror_id, entry_id).settings
    return Results(text, results.parse(files, where), settings, where, entry_id, results.digest(files))


def _recorded_folder(entry_id: str) -> str:
    harness = [r for r in recipes_for(entry_id) if r.kind == "harness"]
    if not harness:
        raise UsageError(detail=f"no repro recipe records a result folder of {entry_id}; name it: {entry_id}/PATH")
    return harness[0].section("record")["folder"]
