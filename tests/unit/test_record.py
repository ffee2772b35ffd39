"""record: a namedtuple made without compiling code (collections.namedtuple evals a __new__ for every class,
~70 microseconds of start-up each, a dozen of them before `vault extract` reads a byte). It must behave as the
namedtuple it replaces: checked here against collections.namedtuple itself."""

from __future__ import annotations

import builtins
import copy
import pickle
import subprocess
import sys
from collections import namedtuple

import pytest

from cloudvault.record import record

FIELDS = "path size mode blake3 archive"
Made = record("Made", FIELDS, defaults=(None, None))
Std = namedtuple("Std", FIELDS, defaults=(None, None))
Bare = record("Bare", "a b")


class Sub(record("Sub", "x y", defaults=(0,))):
    """A record with methods of its own, as the models are."""

    __slots__ = ()

    @property
    def total(self) -> int:
        return self.x + self.y


CALLS = [
    ((1, 2, 3), {}),
    ((1, 2, 3, 4), {}),
    ((1, 2, 3, 4, 5), {}),
    ((), {"path": 1, "size": 2, "mode": 3}),
    ((1,), {"size": 2, "mode": 3, "archive": 5}),
    ((1, 2), {"mode": 3, "blake3": 4, "archive": 5}),
    ((1, 2, 3, 4, 5, 6), {}),  # too many
    ((1, 2), {}),  # a field without a default missing
    ((1, 2, 3), {"nope": 1}),  # unknown
    ((1, 2, 3), {"path": 9}),  # given twice
    ((), {}),
]


def outcome(cls, args, kwargs):
    try:
        made = cls(*args, **kwargs)
    except TypeError:
        return TypeError
    return tuple(made), made._asdict(), repr(made).split("(", 1)[1]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_it_is_made_and_refused_as_a_namedtuple_is(args, kwargs):
    assert outcome(Made, args, kwargs) == outcome(Std, args, kwargs)


def test_fields_defaults_make_replace_and_match_are_a_namedtuples():
    made, std = Made(1, 2, 3), Std(1, 2, 3)
    assert Made._fields == Std._fields and Made._field_defaults == Std._field_defaults
    assert Made.__match_args__ == Std.__match_args__
    assert made == std == (1, 2, 3, None, None) and hash(made) == hash(std)
    assert (made.path, made.size, made.archive) == (1, 2, None) and made[1] == 2
    assert tuple(Made._make([5, 6, 7, 8, 9])) == tuple(Std._make([5, 6, 7, 8, 9]))
    with pytest.raises(TypeError):
        Made._make([1, 2])
    assert tuple(made._replace(size=7, archive="a")) == tuple(std._replace(size=7, archive="a"))
    assert made.__replace__(size=7) == made._replace(size=7)  # copy.replace, Python 3.13
    with pytest.raises(ValueError):
        made._replace(nope=1)
    with pytest.raises(AttributeError):
        made.path = 3
    with pytest.raises(AttributeError):
        made.other = 3
    match made:
        case Made(path, size, mode):
            assert (path, size, mode) == (1, 2, 3)
    assert isinstance(made, tuple) and not hasattr(made, "__dict__")


def test_it_pickles_and_copies_and_a_subclass_keeps_its_type():
    sub = Sub(1, y=2)
    assert sub.total == 3 and Sub(4).total == 4 and type(sub._replace(x=5)) is Sub
    assert type(Sub._make([1, 2])) is Sub and repr(sub) == "Sub(x=1, y=2)"
    for value in (Made(1, 2, 3), sub, Bare("a", "b")):
        for again in (pickle.loads(pickle.dumps(value, protocol)) for protocol in range(pickle.HIGHEST_PROTOCOL + 1)):
            assert again == value and type(again) is type(value)
        assert copy.copy(value) == value and copy.deepcopy(value) == value
    assert Made.__module__ == __name__ and Sub.__mro__[1].__name__ == "Sub"


def test_making_one_compiles_no_code(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("compiled code")

    monkeypatch.setattr(builtins, "eval", refuse)
    monkeypatch.setattr(builtins, "compile", refuse)
    assert record("R", "a b c", defaults=(1,))(0, 2) == (0, 2, 1)


@pytest.mark.parametrize(
    "modules",
    [
        "cloudvault.cli.main, cloudvault.cli.extract, cloudvault.extract, cloudvault.io.members, "
        "cloudvault.catalog.mirror_guard, cloudvault.cli.views.extract",
        "cloudvault.cli.main, cloudvault.cli.ls, cloudvault.cli.show, cloudvault.listing, cloudvault.cli.views.ls, "
        "cloudvault.cli.views.show, cloudvault.catalog.records",
    ],
    ids=["extract", "show and ls"],
)
def test_the_modules_extract_show_and_ls_load_make_no_namedtuple(modules):
    code = (
        "import collections, sys; made = []; real = collections.namedtuple\n"
        "def spy(name, *args, **kwargs):\n"
        "    if sys._getframe(1).f_globals['__name__'].startswith('cloudvault'):\n"
        "        made.append(name)\n"
        "    return real(name, *args, **kwargs)\n"
        f"collections.namedtuple = spy\nimport {modules}\nprint(made)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
