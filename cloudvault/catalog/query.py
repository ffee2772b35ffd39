"""Reads of the catalog: resolve an entry ID prefix, search, one entry's details, list files and members."""

from __future__ import annotations

import sqlite3

from cloudvault.errors import AmbiguousEntry, EntryNotFound
from cloudvault.record import record

KINDS = ("entry", "doc", "file", "member", "restore", "run")
COUNT_CAP = 100_000


class Hit(record("Hit", "kind entry path archive size blake3 mirror text")):
    """One search or listing result; `archive` is the archive's mirror path for members, else None.

    A namedtuple, not a dataclass: the search process must start fast, and dataclasses costs milliseconds.
    """

    def to_json(self) -> dict:
        return self._asdict()


class SearchResult:
    def __init__(self, query: list[str]) -> None:
        self.query = query
        self.hits: dict[str, list[Hit]] = {}
        self.totals: dict[str, int] = {}
        self.cautions: dict[str, list[str]] = {}

    @property
    def found(self) -> bool:
        return any(self.hits.values())

    def to_json(self) -> dict:
        return {
            "query": self.query,
            "totals": self.totals,
            "cautions": self.cautions,
            "results": [h.to_json() for kind in KINDS for h in self.hits.get(kind, [])],
        }


def fts_query(terms: list[str]) -> str | None:
    """Each term as a quoted trigram phrase (substring match), all of them required; None if one is too short."""
    if any(len(t) < 3 for t in terms):
        return None
    return " AND ".join('"' + t.replace('"', '""') + '"' for t in terms)


def snippet(body: str, terms: list[str], width: int = 50) -> str:
    """The doc text around the first term found, on one line."""
    at = body.lower().find(terms[0].lower())
    if at < 0:
        return ""
    start, end = max(0, at - width), min(len(body), at + len(terms[0]) + width)
    text = " ".join(body[start:end].split())
    return ("…" if start else "") + text + ("…" if end < len(body) else "")


def like_escape(text: str) -> str:
    """text matched literally inside a LIKE pattern written with ESCAPE '\\'."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _like_clause(column: str, terms: list[str]) -> tuple[str, list[str]]:
    escaped = [like_escape(t) for t in terms]
    return " AND ".join(f"{column} LIKE ? ESCAPE '\\'" for _ in terms), [f"%{t}%" for t in escaped]


# -- entries ----------------------------------------------------------------------------------------------------
def resolve_entry(conn: sqlite3.Connection, query: str) -> tuple[int, str, str]:
    """(mirror_id, entry_id, mirror name) of the one entry that query names exactly or by unique prefix. One query:
    the entries it is a prefix of, those it names exactly marked (no index serves either: entries are few)."""
    mirror, _, name = query.rstrip("/").rpartition(":")  # shell completion adds the slash
    extra, args = ("m.name = ? AND ", [mirror]) if mirror else ("", [])
    found = conn.execute(
        "SELECT e.mirror_id, e.entry_id, m.name, e.entry_id = ? FROM entries e JOIN mirrors m ON m.id = e.mirror_id "
        f"WHERE {extra}e.entry_id LIKE ? ESCAPE '\\' AND e.entry_id != '' ORDER BY e.entry_id, e.mirror_id",
        [name, *args, like_escape(name) + "%"],
    ).fetchall()
    rows = [row[:3] for row in found if row[3]] or [row[:3] for row in found]  # named exactly, else by prefix
    if len(rows) == 1:
        return rows[0]
    if not rows:
        import difflib

        names = [r[0] for r in conn.execute("SELECT entry_id FROM entries WHERE entry_id != '' ORDER BY entry_id")]
        padded = [n for n in names if name.isdigit() and n.startswith(name.zfill(3))]  # `show 14` means 014
        close = padded[:3] or difflib.get_close_matches(name, names, n=3, cutoff=0.4)
        raise EntryNotFound(query=query, hint=f"; did you mean {', '.join(close)}?" if close else "")
    labels = [f"{m}:{e}" if len({r[2] for r in rows}) > 1 else e for _, e, m in rows]
    raise AmbiguousEntry(query=query, count=len(rows), candidates=", ".join(labels[:10]))


def cautions(conn: sqlite3.Connection, keys: set[tuple[int, str]]) -> dict[str, list[str]]:
    """What a user must know before using an entry: its caution, and how many secrets were flagged in it."""
    out: dict[str, list[str]] = {}
    for mirror_id, entry in sorted(keys):
        notes = []
        row = conn.execute(
            "SELECT caution FROM entries WHERE mirror_id = ? AND entry_id = ?", (mirror_id, entry)
        ).fetchone()
        if row and row[0]:
            notes.append(row[0])
        kinds = conn.execute(
            "SELECT kind, count(*) FROM flags WHERE mirror_id = ? AND entry_id = ? GROUP BY kind ORDER BY kind",
            (mirror_id, entry),
        ).fetchall()
        notes += [f"{n} {kind.replace('_', ' ')} flag(s)" for kind, n in kinds]
        if notes and entry:
            out[entry] = notes
    return out


# -- search -----------------------------------------------------------------------------------------------------
def entry_filter(alias: str, scope: tuple[int, str] | None) -> tuple[str, list]:
    """SQL (and its arguments) that keeps rows of one entry, given as (mirror_id, entry_id); none for no scope."""
    if scope is None:
        return "", []
    return f" AND {alias}.mirror_id = ? AND {alias}.entry_id = ?", list(scope)


SEARCH_SQL = {
    "entry": (
        "SELECT 'entry', e.entry_id, e.entry_id, NULL, NULL, NULL, m.name, e.what, e.mirror_id "
        "FROM entries_fts JOIN entries e ON e.id = entries_fts.rowid JOIN mirrors m ON m.id = e.mirror_id "
        "WHERE entries_fts MATCH ?{filter} AND e.entry_id != '' ORDER BY rank",
        "e",
        "(e.entry_id || ' ' || e.what || ' ' || e.node_gpu || ' ' || e.key_files || ' ' || e.caution || ' ' "
        "|| e.settings)",
        "SELECT 'entry', e.entry_id, e.entry_id, NULL, NULL, NULL, m.name, e.what, e.mirror_id "
        "FROM entries e JOIN mirrors m ON m.id = e.mirror_id WHERE {like}{filter} AND e.entry_id != ''",
    ),
    "doc": (
        "SELECT 'doc', f.entry_id, f.path, NULL, f.size, f.blake3, m.name, d.body, f.mirror_id "
        "FROM docs_fts JOIN docs d ON d.id = docs_fts.rowid JOIN files f ON f.id = d.file_id "
        "JOIN mirrors m ON m.id = f.mirror_id WHERE docs_fts MATCH ?{filter} ORDER BY rank",
        "f",
        "d.body",
        "SELECT 'doc', f.entry_id, f.path, NULL, f.size, f.blake3, m.name, d.body, f.mirror_id "
        "FROM docs d JOIN files f ON f.id = d.file_id JOIN mirrors m ON m.id = f.mirror_id WHERE {like}{filter}",
    ),
    "file": (
        "SELECT 'file', f.entry_id, f.path, NULL, f.size, f.blake3, m.name, '', f.mirror_id "
        "FROM files_fts JOIN files f ON f.id = files_fts.rowid JOIN mirrors m ON m.id = f.mirror_id "
        "WHERE files_fts MATCH ?{filter}",
        "f",
        "f.path",
        "SELECT 'file', f.entry_id, f.path, NULL, f.size, f.blake3, m.name, '', f.mirror_id "
        "FROM files f JOIN mirrors m ON m.id = f.mirror_id WHERE {like}{filter}",
    ),
    "member": (
        "SELECT 'member', f.entry_id, mb.path, f.path, mb.size, mb.blake3, m.name, mb.type, f.mirror_id "
        "FROM members_fts JOIN members mb ON mb.id = members_fts.rowid JOIN archives a ON a.id = mb.archive_id "
        "JOIN files f ON f.id = a.file_id JOIN mirrors m ON m.id = f.mirror_id WHERE members_fts MATCH ?{filter}",
        "f",
        "mb.path",
        "SELECT 'member', f.entry_id, mb.path, f.path, mb.size, mb.blake3, m.name, mb.type, f.mirror_id "
        "FROM members mb JOIN archives a ON a.id = mb.archive_id JOIN files f ON f.id = a.file_id "
        "JOIN mirrors m ON m.id = f.mirror_id WHERE {like}{filter}",
    ),
    # what vault did: few rows, so a plain LIKE over their text (no FTS table to keep in step)
    "restore": (
        None,
        "r",
        "('restored ' || r.kind || ' ' || r.name || ' ' || r.source || ' ' || r.target || ' ' || r.status || ' ' "
        "|| r.detail)",
        "SELECT 'restore', r.entry_id, r.target, r.source, NULL, r.source_hash, m.name, "
        "r.kind || ' ' || r.name || ': ' || r.status || ' at ' || r.finished_at, r.mirror_id "
        "FROM restores r LEFT JOIN mirrors m ON m.id = r.mirror_id WHERE {like}{filter}",
    ),
    "run": (
        None,
        "r",
        "('run ' || r.run_id || ' ' || r.recipe || ' ' || r.executor || ' ' || r.status || ' ' "
        "|| COALESCE(r.verdict, '') || ' ' || r.folder)",
        "SELECT 'run', r.entry_id, r.run_id, NULL, NULL, NULL, m.name, "
        "r.recipe || ' ' || r.executor || ': ' || r.status || ' ' || COALESCE(r.verdict, ''), r.mirror_id "
        "FROM runs r LEFT JOIN mirrors m ON m.id = r.mirror_id WHERE {like}{filter}",
    ),
}


# kind -> its FTS table, whose rows are exactly the kind's rows (triggers keep it in step, foreign keys cascade): a
# total over the whole catalog counts FTS matches alone, without the joins (a quarter of a selective count on 1M)
FTS_TABLES = {"doc": "docs_fts", "file": "files_fts", "member": "members_fts"}


def _search_kind(
    conn: sqlite3.Connection, kind: str, terms: list[str], scope: tuple[int, str] | None, limit: int
) -> tuple[list[tuple], int]:
    fts_sql, alias, like_col, like_sql = SEARCH_SQL[kind]
    filt, fargs = entry_filter(alias, scope)
    match = fts_query(terms) if fts_sql else None
    if match is not None:
        sql, args = fts_sql.format(filter=filt), [match, *fargs]
    else:
        like, largs = _like_clause(like_col, terms)
        sql, args = like_sql.format(like=like, filter=filt), [*largs, *fargs]
    if limit <= 0:
        rows = conn.execute(sql, args).fetchall()
        return rows, len(rows)
    rows = conn.execute(f"{sql} LIMIT ?", [*args, limit]).fetchall()
    if len(rows) < limit:
        return rows, len(rows)
    if match is not None and scope is None and kind in FTS_TABLES:
        table = FTS_TABLES[kind]
        count_sql, args = f"SELECT 1 FROM {table} WHERE {table} MATCH ?", [match]
    else:
        count_sql = sql.replace(" ORDER BY rank", "")
    total = conn.execute(f"SELECT count(*) FROM ({count_sql} LIMIT {COUNT_CAP})", args).fetchone()[0]
    return rows, total


def search(
    conn: sqlite3.Connection,
    terms: list[str],
    *,
    scope: tuple[int, str] | None = None,
    kinds: tuple[str, ...] = KINDS,
    limit: int = 20,
) -> SearchResult:
    """Entries, docs, files and members whose text holds every term (case-insensitive substrings)."""
    result = SearchResult(query=terms)
    seen: set[tuple[int, str]] = set()
    for kind in kinds:
        rows, total = _search_kind(conn, kind, terms, scope, limit)
        hits = [Hit(*row[:8]) for row in rows]
        if kind == "doc":
            hits = [h._replace(text=snippet(h.text, terms)) for h in hits]
        result.hits[kind] = hits
        result.totals[kind] = total
        seen.update((row[8], row[1]) for row in rows)
    result.cautions = cautions(conn, seen)
    return result


def known_mirrors(conn: sqlite3.Connection) -> dict[str, tuple[str, str | None]]:
    """root -> (name, manifest) of every mirror in the catalog, in the order they were added."""
    return {root: (name, manifest) for name, root, manifest in
            conn.execute("SELECT name, root, manifest FROM mirrors ORDER BY id")}  # fmt: skip
