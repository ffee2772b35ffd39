"""Open, create, migrate and lock the catalog file."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from typing import TYPE_CHECKING

from cloudvault.errors import (
    CatalogBusy,
    CatalogMissing,
    CatalogTooNew,
    CatalogTooOld,
    NotACatalog,
    UsageError,
    from_sqlite,
)

if TYPE_CHECKING:  # pathlib (and urllib.parse, ipaddress) cost every start ~3 ms: imported where a Path is made
    from pathlib import Path

# the catalog schema this vault reads and writes: catalog/migrations.py's steps bring an older one to it (its module
# loaded only then and for a new catalog, not by every command on a current one)
SCHEMA_VERSION = 11
# a new catalog's page size (SQLite's default is 4 KiB): an index's large commits write a quarter of the WAL frames,
# ~7% off indexing 200k small members (0.96 -> 0.89 s in-process), the file no larger; a catalog made with other
# pages keeps them (changing would rewrite the whole file)
PAGE_SIZE = 16384
SQLITE_HEADER = b"SQLite format 3\0"  # the first 16 bytes of every SQLite database file
NO_META = "an SQLite database without vault's meta table"


class _NotVaultCatalog(sqlite3.DatabaseError):
    """An SQLite file that is not a vault catalog: open_catalog turns it into NotACatalog, naming what named it."""


def _connect(path: str, readonly: bool = False, immutable: bool = False) -> sqlite3.Connection:
    """A connection; timeout=30 is SQLite's busy timeout (30 s of retries while another process writes)."""
    if readonly:
        flags = "mode=ro&immutable=1" if immutable else "mode=ro"
        return sqlite3.connect(f"file:{_uri_path(path)}?{flags}", uri=True, timeout=30)
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")  # only writes check them: a read-only connection does without
    return conn


def _uri_path(path: str) -> str:
    """The absolute path as the path of a file: URI. SQLite decodes %HH there and ends the path at ? or #, so
    those three are escaped (urllib.parse.quote would do, at the cost of importing it on every start)."""
    full = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    return full.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


def _create(path: str) -> None:
    """A new catalog is built under a temp name and renamed into place, so a crash leaves none or a whole one."""
    from cloudvault.atomic import atomic_path  # here: `vault show` and `vault ls` never write a file
    from cloudvault.catalog import migrations

    with atomic_path(path, mode=0o600) as tmp:
        conn = _connect(tmp)
        try:
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # before the first table: then it is fixed
            migrations.create_schema(conn, SCHEMA_VERSION)  # one commit, not one per table (~30 ms)
        finally:
            conn.close()


def meta_value(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def set_meta_value(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value)
    )


def schema_version(conn: sqlite3.Connection) -> int:
    """The catalog's schema version (0: the first schema, which recorded none); a SQLite file without vault's meta
    table is not a catalog, and a version that is not a whole number (edited, damaged) is a damaged catalog."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            raise _NotVaultCatalog(NO_META) from None
        raise
    if row is None:
        return 0
    value = row[0]
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and int(value) >= 1:
        return int(value)
    raise sqlite3.DatabaseError(f"its schema version is {value!r}, not a version number")


def migrate(conn: sqlite3.Connection, path: str | os.PathLike) -> None:
    """Bring the catalog to SCHEMA_VERSION under the writer lock (taken here unless this process holds it)."""
    found = schema_version(conn)
    if found > SCHEMA_VERSION:
        raise CatalogTooNew(path=path, found=found, supported=SCHEMA_VERSION)
    if found == SCHEMA_VERSION:
        return
    held = os.path.abspath(path) in _LOCKS_HELD
    then = f"vault migrates the catalog to schema {SCHEMA_VERSION} under the same lock: retry when it ends"
    from cloudvault.catalog import migrations

    with contextlib.nullcontext() if held else writer_lock(path, busy_then=then):
        # the version read again: another vault may have migrated it meanwhile
        migrations.migrate(conn, schema_version(conn), SCHEMA_VERSION)


def open_catalog(path: str | os.PathLike, *, create: bool = False, readonly: bool = False,
                 named_by: str = "the catalog") -> sqlite3.Connection:  # fmt: skip
    """The catalog at path; created (mode 0600) when asked, else CatalogMissing. A file that is not a catalog is
    NotACatalog, a damaged one CatalogDamaged (one line, never a traceback); named_by says what named the path
    (--catalog, $VAULT_CATALOG), so that the message names what the user set."""
    path = os.fspath(path)
    refuse_folder(path, named_by)
    if not os.path.exists(path):
        if not create:
            raise CatalogMissing(path=path)
        _create(path)
    _refuse_non_sqlite(path, named_by)
    try:
        return _open_existing(path, readonly)
    except _NotVaultCatalog as exc:
        raise NotACatalog(path=path, why=str(exc), named_by=named_by) from None
    except sqlite3.DatabaseError as exc:  # by its kind: locked, full, refused, or really damaged
        raise from_sqlite(exc, path) from None


def refuse_folder(path: str, named_by: str = "the catalog") -> None:
    """UsageError for a folder given where the catalog file goes, with the file it may have meant."""
    if os.path.isdir(path):
        example = os.path.join(path, "catalog.db")
        raise UsageError(detail=f"{named_by} {path} is a folder; give the catalog file (e.g. {example})")


def _refuse_non_sqlite(path: str, named_by: str) -> None:
    """NotACatalog for a file that is empty or does not start with SQLite's header (a text file, a program)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError:
        return  # unreadable: SQLite's own error says why
    if head != SQLITE_HEADER:
        why = "an empty file" if not head else "not an SQLite database"
        raise NotACatalog(path=path, why=why, named_by=named_by)


def refuse_non_catalog(path: str | os.PathLike, named_by: str = "the catalog") -> None:
    """NotACatalog (or the folder's UsageError) unless path is absent or a vault catalog, found by reading alone:
    `vault index` asks before it takes the writer lock, so a wrong --catalog leaves nothing beside it."""
    path = os.fspath(path)
    refuse_folder(path, named_by)
    if not os.path.isfile(path):
        return
    _refuse_non_sqlite(path, named_by)
    try:
        conn = sqlite3.connect(f"file:{_uri_path(path)}?mode=ro&immutable=1", uri=True)  # immutable: makes no file
        try:
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return  # damaged: opening it says how
    if found is None:
        raise NotACatalog(path=path, why=NO_META, named_by=named_by)


def _open_existing(path: str, readonly: bool) -> sqlite3.Connection:
    if readonly:
        # a catalog in a folder this user cannot write (a shared, read-only copy): no -shm/-wal can be made there,
        # so it is opened immutable; nobody can be writing it from here either
        immutable = not os.access(os.path.dirname(path) or ".", os.W_OK)
        conn = _connect(path, readonly=True, immutable=immutable)
        found = schema_version(conn)
        if found > SCHEMA_VERSION:
            raise CatalogTooNew(path=path, found=found, supported=SCHEMA_VERSION)
        if found < SCHEMA_VERSION:  # readers see the current schema: a writer migrates it first, under the lock
            conn.close()
            if immutable or not os.access(path, os.W_OK):
                raise CatalogTooOld(path=path, found=found, supported=SCHEMA_VERSION)
            open_catalog(path).close()
            conn = _connect(path, readonly=True)
        return conn
    conn = _connect(path)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        migrate(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


BULK_CACHE_KIB = 32 << 10


FTS_AUTOMERGE = 16  # FTS5's default is 4
BULK_FTS = ("members_fts", "files_fts")


def for_bulk_writes(conn: sqlite3.Connection) -> None:
    """A larger page cache for this connection (SQLite's default is 2 MiB): `vault index` copies members and
    their full-text rows in large transactions, which touch many index pages (~10% off 200k members' commit).
    The full-text indexes of paths merge their segments less eagerly: with FTS5's default, merging took half of
    the time of filling members_fts for 200k members, and searches were no faster for it (a setting the index
    keeps, written by the index that first needs it: no migration)."""
    conn.execute(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
    for table in BULK_FTS:
        row = conn.execute(f"SELECT v FROM {table}_config WHERE k = 'automerge'").fetchone()
        if row is None or row[0] != FTS_AUTOMERGE:
            with transaction(conn):
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', ?)", (FTS_AUTOMERGE,))


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One atomic unit (an archive's rows, a batch of files): all of it lands, or none."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


_LOCKS_HELD: set[str] = set()  # catalogs whose writer lock this process holds (a second flock would wait on it)


@contextlib.contextmanager
def writer_lock(path: str | os.PathLike, *, wait: bool = False, busy_then: str | None = None) -> Iterator[None]:
    """One writer per catalog (an indexer, a merge, a migration): a second refuses (CatalogBusy) or, with wait,
    blocks until the first ends."""
    import fcntl
    import time
    from pathlib import Path

    path = Path(path)
    lock_path = path.with_name(path.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not wait:
                    pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                    then = {"then": busy_then} if busy_then else {}
                    raise CatalogBusy(pid=pid, path=path, **then) from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        _LOCKS_HELD.add(os.path.abspath(path))
        try:
            yield
        finally:
            _LOCKS_HELD.discard(os.path.abspath(path))
    finally:
        os.close(fd)


@contextlib.contextmanager
def catalog_opened(path: str | os.PathLike, *, readonly: bool, create: bool = False, named_by: str = "the catalog",
                   shared: bool = False, optional: bool = False) -> Iterator[sqlite3.Connection | None]:  # fmt: skip
    """The catalog at path (open_catalog, or open_shared_reader when shared), closed when the block ends, by an
    error or Ctrl-C too; optional: a missing catalog is None, not CatalogMissing."""
    try:
        if shared:
            conn = open_shared_reader(path, named_by)
        else:
            conn = open_catalog(path, readonly=readonly, create=create, named_by=named_by)
    except CatalogMissing:
        if not optional:
            raise
        conn = None
    try:
        yield conn
    finally:
        if conn is not None:
            conn.close()


def open_shared_reader(path: str | os.PathLike, named_by: str = "the catalog") -> sqlite3.Connection:
    """A read-only connection that any thread may use (its users take turns under their own lock): `vault mount`
    answers from many FUSE threads. Checked as open_catalog checks (missing, damaged, too new) first."""
    path = os.fspath(path)
    open_catalog(path, readonly=True, named_by=named_by).close()
    immutable = not os.access(os.path.dirname(path) or ".", os.W_OK)
    flags = "mode=ro&immutable=1" if immutable else "mode=ro"
    return sqlite3.connect(f"file:{_uri_path(path)}?{flags}", uri=True, timeout=30, check_same_thread=False)


def catalog_file(conn: sqlite3.Connection) -> Path:
    """The file behind the connection (shards and caches are made beside it)."""
    from pathlib import Path

    return Path(conn.execute("PRAGMA database_list").fetchone()[2])
