"""Rows read by column name: a query's rows as records (namedtuples), every field found by its column's name (the
SELECT's name or AS alias), never by position, so a column a migration adds or a reordered SELECT shifts no field."""

from __future__ import annotations

import sqlite3


def records_of(cls, cursor: sqlite3.Cursor) -> list:
    """Each row of cursor as a cls (a namedtuple), every field read by its column name (the SELECT's name or AS
    alias), never by position: a column a migration adds or a reordered SELECT shifts no field. A field with a
    default may be missing from the SELECT; any other missing one is a KeyError naming it."""
    from operator import itemgetter

    names = {d[0]: i for i, d in enumerate(cursor.description)}
    wanted = [f for f in cls._fields if f in names or f not in cls._field_defaults]
    get = itemgetter(*[names[f] for f in wanted])
    if len(wanted) == 1:
        return [cls(**{wanted[0]: row[names[wanted[0]]]}) for row in cursor]
    if wanted == list(cls._fields[: len(wanted)]):  # the usual case: positional after the by-name lookup
        return [cls(*get(row)) for row in cursor]
    return [cls(**dict(zip(wanted, get(row), strict=True))) for row in cursor]


def record_of(cls, cursor: sqlite3.Cursor):
    """The first row of cursor as a cls (records_of), or None when there is none."""
    found = records_of(cls, _first(cursor))
    return found[0] if found else None


class _first:
    """A cursor that yields its first row only (fetchone's row, read by records_of)."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self.description, self.row = cursor.description, cursor.fetchone()

    def __iter__(self):
        return iter([] if self.row is None else [self.row])
