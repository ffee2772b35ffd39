"""Datasette hooks of `vault browse`: read-only connections, the `vault_*` SQL functions, links and commands.

The SQL functions reuse `catalog.query` (the FTS5 phrase, the snippet, the cautions, entry-ID resolution), so
the browser and `vault search` / `vault show` agree. Every connection is `query_only`, the write one included.
"""

from __future__ import annotations

import re
import shlex
import sqlite3
from urllib.parse import quote, urlencode

from datasette import hookimpl
from datasette.database import Database
from markupsafe import Markup, escape

from cloudvault.catalog import query
from cloudvault.errors import VaultError

DATABASE = "catalog"
# a link cell is a relative `page?key=value` made by vault_link/vault_open; anything else stays text
LINK = re.compile(r"^[a-z_]+\?[^:/]*$")
# columns of long unbroken text (paths, hashes, JSON) that may wrap anywhere, so a page fits the window
WRAPPED = {"value", "path", "text", "in_archive", "archive", "blake3", "detail", "source", "target", "folder"}
# one click selects the whole command; it may wrap on screen, the copied text stays one line
COMMAND_STYLE = (
    "user-select: all; white-space: pre-wrap; overflow-wrap: anywhere; display: inline-block; min-width: 28ch"
)
COPY_BUTTON = (
    '<button type="button" class="vault-copy" title="copy the command" '
    'onclick="navigator.clipboard &amp;&amp; navigator.clipboard.writeText(this.previousElementSibling.textContent)">'
    "copy</button>"
)


class CatalogDatabase(Database):
    """The catalog as Datasette opens it: every connection, its write one too, read-only through a quoted URI.

    (Datasette's own puts the path in the URI unquoted, so a `#`, `?` or `%` in it would open another file.)
    """

    def connect(self, write: bool = False) -> sqlite3.Connection:
        flags = "mode=ro" if self.is_mutable else "immutable=1"
        conn = sqlite3.connect(f"file:{quote(self.path)}?{flags}", uri=True, check_same_thread=False)
        self._all_file_connections.append(conn)
        return conn


def _terms(q: str | None) -> list[str]:
    return [t for t in (q or "").split() if t.strip()]


def vault_match(q: str | None) -> str:
    """The FTS5 phrase `vault search` uses; '""' (matches nothing) when a term is too short or none is given."""
    return query.fts_query(_terms(q)) or '""'


def vault_needs_scan(q: str | None) -> int:
    """1 when the substring scan must answer instead of FTS5 (a term under 3 characters)."""
    terms = _terms(q)
    return int(bool(terms) and query.fts_query(terms) is None)


def vault_has_terms(text: str | None, q: str | None) -> int:
    """Every term is a case-insensitive substring of text (no terms: no match)."""
    terms, low = _terms(q), (text or "").lower()
    return int(bool(terms) and all(t.lower() in low for t in terms))


def vault_snippet(body: str | None, q: str | None) -> str:
    terms = _terms(q)
    return query.snippet(body or "", terms) if terms else ""


def vault_link(page: str, key: str, value: object) -> str | None:
    return None if value is None else f"{page}?{urlencode({key: value})}"


def vault_command(kind: str, entry: str | None, path: str | None, archive: str | None) -> str | None:
    """The command that fetches a hit: `vault show` for entries, runs and restores, `vault extract` for data."""
    if not entry:  # the mirror's top level is not an entry vault can show or extract from
        return None
    if kind in ("doc", "file"):  # the path inside the entry; entry may be mirror:entry
        return shlex.join(["vault", "extract", entry, path.removeprefix(f"{entry.rpartition(':')[2]}/")])
    if kind == "member":
        return shlex.join(["vault", "extract", entry, path, "--archive", archive.rsplit("/", 1)[-1]])
    return shlex.join(["vault", "show", entry])


def vault_open(kind: str, entry: str | None, path: str | None, archive: str | None) -> str | None:
    """The browse page of a hit."""
    if kind == "member":
        return f"members?{urlencode({'archive': archive, 'path': path})}"
    if kind == "run":
        return vault_link("run", "run", path)
    if kind == "restore":
        return vault_link("restores", "entry", entry)
    return vault_link("entry", "entry", entry) if entry else None


def register_functions(conn: sqlite3.Connection) -> None:
    """The vault_* SQL functions the canned queries call; those that read the catalog close over conn."""

    def resolve(q: str | None) -> tuple[int | None, str | None]:
        if not (q or "").strip():
            return None, "type an entry ID or unique prefix, e.g. 014"
        try:
            mirror_id, entry_id, _ = query.resolve_entry(conn, q.strip())
        except VaultError as exc:
            return None, exc.message
        row = conn.execute("SELECT id FROM entries WHERE mirror_id = ? AND entry_id = ?", (mirror_id, entry_id))
        return row.fetchone()[0], None

    def entry_name(mirror_id: int | None, entry: str | None) -> str | None:
        """The entry ID as `vault show` takes it: mirror:entry only where another mirror has the same ID."""
        if not entry or conn.execute("SELECT count(*) FROM entries WHERE entry_id = ?", (entry,)).fetchone()[0] < 2:
            return entry
        name = conn.execute("SELECT name FROM mirrors WHERE id = ?", (mirror_id,)).fetchone()
        return f"{name[0]}:{entry}" if name else entry

    def cautions(mirror_id: int | None, entry: str | None) -> str:
        return "; ".join(query.cautions(conn, {(mirror_id, entry)}).get(entry, [])) if entry else ""

    pure = [
        ("vault_match", 1, vault_match), ("vault_needs_scan", 1, vault_needs_scan),
        ("vault_has_terms", 2, vault_has_terms), ("vault_snippet", 2, vault_snippet),
        ("vault_link", 3, vault_link), ("vault_command", 4, vault_command), ("vault_open", 4, vault_open),
    ]  # fmt: skip
    for name, nargs, fn in pure:
        conn.create_function(name, nargs, fn, deterministic=True)
    conn.create_function("vault_cautions", 2, cautions)
    conn.create_function("vault_entry_name", 2, entry_name)
    conn.create_function("vault_entry_row", 1, lambda q: resolve(q)[0])
    conn.create_function("vault_entry_problem", 1, lambda q: resolve(q)[1])


@hookimpl
def prepare_connection(conn: sqlite3.Connection, database: str, datasette) -> None:
    if database == DATABASE:  # not Datasette's own _internal database, which it writes
        # belt and braces beside mode=ro / immutable: even Datasette's write connection cannot change a row
        conn.execute("PRAGMA query_only = 1")
        register_functions(conn)


@hookimpl
def render_cell(row, value, column, table, database, datasette):
    """Links to browse pages, copyable commands, multi-line text kept as written; everything escaped."""
    if database != DATABASE or not isinstance(value, str):
        return None
    if column == "open" and LINK.match(value):
        page = value.split("?", 1)[0]
        return Markup(f'<a href="{escape(datasette.urls.database(DATABASE))}/{escape(value)}">{escape(page)} →</a>')
    if column == "command" or (column == "value" and table is None and _field(row) == "command"):
        return Markup(f'<code class="vault-command" style="{COMMAND_STYLE}">{escape(value)}</code> {COPY_BUTTON}')
    if table is None and (column in WRAPPED or "\n" in value):  # long paths, JSON, ENVIRONMENT.md wrap in place
        width = "min-width: 24ch; max-width: 100ch" if column == "value" else "min-width: 16ch; max-width: 48ch"
        return Markup(f'<div style="white-space: pre-wrap; overflow-wrap: anywhere; {width}">{escape(value)}</div>')
    return None


def _field(row) -> str | None:
    try:
        return row["field"]
    except (IndexError, KeyError):
        return None


@hookimpl
def asgi_wrapper(datasette):
    """Only GET and HEAD reach Datasette: a POST (a write API call, a form, a canned query) is 405 at the door."""

    def wrap(app):
        async def read_only(scope, receive, send):
            if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD"):
                headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"allow", b"GET, HEAD")]
                await send({"type": "http.response.start", "status": 405, "headers": headers})
                await send({"type": "http.response.body", "body": b"vault browse serves the catalog read-only\n"})
                return
            await app(scope, receive, send)

        return read_only

    return wrap
