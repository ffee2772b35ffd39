"""`record`: the one way the package makes a record type, a namedtuple class made without compiling code.

collections.namedtuple compiles a __new__ for every class: ~70 microseconds of start-up each, a dozen of them before
`vault extract` reads a byte. A record is a namedtuple in everything else (fields, defaults, _make, _replace,
_asdict, repr, pickling, match), its usual calls (every field by position or by name) bound in C. Its own module,
so that a command loads the record types it uses and no others (models.py holds the shared ones).
"""

from __future__ import annotations

import sys
from operator import itemgetter

try:
    from _collections import _tuplegetter  # the field accessor collections.namedtuple itself uses (CPython's C one)
except ImportError:  # pragma: no cover - another Python

    def _tuplegetter(index: int, doc: str) -> property:
        return property(itemgetter(index), doc=doc)


class _Record(tuple):
    """What every record class shares: namedtuple's methods, written once over the class's _fields."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _field_defaults: dict = {}

    @classmethod
    def _make(cls, iterable):
        made = tuple.__new__(cls, iterable)
        if len(made) != len(cls._fields):
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(made)}")
        return made

    def _replace(self, **changes):
        made = self._make(map(changes.pop, self._fields, self))
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return made

    __replace__ = _replace  # copy.replace (Python 3.13), as namedtuple has it

    def _asdict(self) -> dict:
        return dict(zip(self._fields, self, strict=True))

    def __getnewargs__(self) -> tuple:
        return tuple(self)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True))
        return f"{self.__class__.__name__}({shown})"


def _given(cls, args: tuple, kwargs: dict) -> list:
    """The values of a record made with keywords (or too few or many values), refused with namedtuple's TypeErrors."""
    name, fields = cls.__name__, cls._fields
    if len(args) > len(fields):
        raise TypeError(f"{name}() takes at most {len(fields)} arguments ({len(args)} given)")
    twice = next((field for field in fields[: len(args)] if field in kwargs), None)
    if twice is not None:
        raise TypeError(f"{name}() got multiple values for argument {twice!r}")
    values = list(args)
    for field in fields[len(args) :]:
        if field in kwargs:
            values.append(kwargs.pop(field))
        elif field in cls._field_defaults:
            values.append(cls._field_defaults[field])
        else:
            raise TypeError(f"{name}() missing required argument {field!r}")
    if kwargs:
        raise TypeError(f"{name}() got an unexpected keyword argument {next(iter(kwargs))!r}")
    return values


def record(typename: str, field_names: str, *, defaults: tuple = ()) -> type:
    """A namedtuple class of these space-separated fields (the last len(defaults) of them with those defaults),
    made without compiling code; its __module__ is the caller's, so its values pickle."""
    fields = tuple(field_names.split())
    count, first_default = len(fields), len(fields) - len(defaults)
    new_tuple = tuple.__new__
    by_name = itemgetter(*fields) if count > 1 else lambda given: (given[fields[0]],)

    def __new__(cls, *args, **kwargs):  # the usual calls (every field by position or by name) bound in C
        if kwargs:
            if not args and len(kwargs) == count:
                try:
                    return new_tuple(cls, by_name(kwargs))
                except KeyError:
                    pass  # a name that is not a field: refused below
        elif len(args) == count:
            return new_tuple(cls, args)
        elif first_default <= len(args) < count:
            return new_tuple(cls, args + defaults[len(args) - first_default :])
        return new_tuple(cls, _given(cls, args, kwargs))

    namespace = {
        "__doc__": f"{typename}({', '.join(fields)})", "__slots__": (), "__new__": __new__, "_fields": fields,
        "_field_defaults": dict(zip(fields[first_default:], defaults, strict=True)), "__match_args__": fields,
        **{name: _tuplegetter(index, f"Alias for field number {index}") for index, name in enumerate(fields)},
    }  # fmt: skip
    made = type(typename, (_Record,), namespace)
    made.__module__ = sys._getframe(1).f_globals.get("__name__", "__main__")
    return made
