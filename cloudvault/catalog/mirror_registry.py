"""The per-user registry of every mirror root any catalog of this user has indexed, read by the mirror guard.

A catalog knows only its own mirrors, and a user may have several (their own, the demo's through VAULT_CATALOG,
one per project): a write must be refused inside any of their mirrors, whichever catalog is active. `vault index`
records each root it indexes here (root, display name, catalog file, when) before the catalog's row is written,
so a crash leaves a root guarded rather than unguarded; `vault index --prune` and `vault mirrors rm` forget one.
The file is a text file in the XDG state dir ($XDG_STATE_HOME/cloudvault/mirrors.tsv), changed only under its lock
file, written whole to a temp name, fsynced and renamed into place.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from operator import itemgetter

from cloudvault import config, errors


class RegistryDamaged(errors.EnvironmentProblem):
    """mirror registry {path} cannot be read ({detail}); vault writes nothing while it cannot tell where the \
mirrors are: move that file away, then index each mirror again (vault index ROOT)"""


class Registered(tuple):
    """One recorded root: (root, display name, catalog file as a realpath, indexed_at), read by name. Made by hand,
    not a NamedTuple: making one compiles code, a millisecond of every `vault extract` (its guard reads this)."""

    __slots__ = ()
    _fields = ("root", "name", "catalog", "indexed_at")
    root = property(itemgetter(0))
    name = property(itemgetter(1))
    catalog = property(itemgetter(2))
    indexed_at = property(itemgetter(3))

    def __new__(cls, root: str, name: str, catalog: str, indexed_at: str) -> Registered:
        return tuple.__new__(cls, (root, name, catalog, indexed_at))


HEADER = "# cloudvault mirror registry 1: root, name, catalog, indexed_at; tab-separated, \\ \\t \\n \\r escaped"
_ESCAPE = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_UNESCAPE = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}


def registered() -> list[Registered]:
    """Every recorded mirror root, in the order they were first recorded; none when there is no registry yet.
    (Lines, not JSON: every `vault extract` reads it, and importing json would cost each start a millisecond.)"""
    return [Registered(*map(_unescaped, line.split("\t"))) for line in _lines()]


def registered_roots() -> list[str]:
    """Every recorded root once, as registered() has them: the guard of every `vault extract -o` reads only these,
    so only the first field of each line is unescaped."""
    return list(dict.fromkeys(_unescaped(line.partition("\t")[0]) for line in _lines()))


def _lines() -> list[str]:
    """The registry's record lines, each checked to hold its four fields; RegistryDamaged when it cannot be read."""
    path = config.mirror_registry_path()
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="\n") as fh:
            lines = fh.read().split("\n")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise RegistryDamaged(path=path, detail=exc.strerror or str(exc)) from None
    if lines[0] != HEADER or lines[-1] != "":
        raise RegistryDamaged(path=path, detail="not a registry, or cut short")
    fields = len(Registered._fields) - 1
    if any(line.count("\t") != fields for line in lines[1:-1]):
        raise RegistryDamaged(path=path, detail="a line without its four fields")
    return lines[1:-1]


def _unescaped(field: str) -> str:
    """The field as written: each backslash escape undone, left to right (\\\\t is \\t); a backslash before
    anything else stays. (Found with str.find: compiling a regular expression cost every `vault extract`.)"""
    if "\\" not in field:
        return field
    out, at = [], 0
    while (slash := field.find("\\", at)) != -1:
        code = field[slash + 1 : slash + 2]
        out += [field[at:slash], _UNESCAPE.get(code, "\\" + code)]
        at = slash + 2
    out.append(field[at:])
    return "".join(out)


def _line(row: Registered) -> str:
    return "\t".join(field.translate(_ESCAPE) for field in row)


def catalog_key(catalog: str | os.PathLike) -> str:
    """How a catalog file is named in the registry: its resolved path."""
    return os.path.realpath(os.fspath(catalog))


def record(catalog: str | os.PathLike, mirrors: Iterable[tuple[str, str]]) -> None:
    """Each (root, display name) as indexed into catalog now; a root already recorded for it is brought up to date."""
    from datetime import UTC, datetime  # not at import: the guard in every `vault extract` only reads

    key, now = catalog_key(catalog), datetime.now(UTC).isoformat(timespec="seconds")

    def add(rows: list[Registered]) -> list[Registered]:
        by_root = {(row.root, row.catalog): row for row in rows}
        for root, name in mirrors:
            by_root[(root, key)] = Registered(root, name, key, now)
        return list(by_root.values())

    _change(add)


def forget(records: Iterable[tuple[str, str]]) -> None:
    """Those (root, catalog) records gone: a mirror removed from its catalog, or one whose catalog is gone."""
    gone = {(root, catalog_key(catalog)) for root, catalog in records}
    _change(lambda current: [row for row in current if (row.root, row.catalog) not in gone])


def _change(edit: Callable[[list[Registered]], list[Registered]]) -> None:
    """Read, edit and rewrite the registry under its lock; unchanged, it is not rewritten."""
    from cloudvault.atomic import atomic_write

    path = config.mirror_registry_path()
    with _locked(path):
        rows = registered()
        changed = edit(rows)
        if changed != rows:
            text = "".join(f"{line}\n" for line in [HEADER, *map(_line, changed)])
            with atomic_write(path, force=True, mode=0o600) as fh:
                fh.write(text.encode("utf-8", "surrogateescape"))


@contextmanager
def _locked(path: str) -> Iterator[None]:
    """The registry's writers one at a time (two `vault index` runs on two catalogs), through a lock file beside it."""
    import fcntl

    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path + ".lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
