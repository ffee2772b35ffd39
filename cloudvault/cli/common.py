"""What the commands share: the catalog a command opens, closed when it ends, however it ends (borg's
with_repository), and the output options --json and --quiet, defined once.

Imported by every command module at start-up: it imports the catalog layer only when a command opens a catalog.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

JSON_HELP = "print one JSON document on stdout"
QUIET_HELP = "no progress bar or warnings"


def add_output_options(parser, *, quiet: bool = False) -> None:
    """--json (every command that has it) and, with quiet, -q/--quiet: one definition, one help text."""
    if quiet:
        parser.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    parser.add_argument("--json", action="store_true", help=JSON_HELP)


def catalog_name(text: str) -> str:
    """An argument naming what the catalog holds (an entry, a path, a glob, a search term), in the catalog's text
    form: bytes that are not UTF-8 (typed raw, or a shell glob that expanded to a raw name; Python hands them over
    as surrogates) become the \\xNN escapes the catalog keeps such a name under (its raw bytes beside it)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        import os

        from cloudvault.tools.mirrorfs import text_path

        return text_path(os.fsencode(text))[0]


def bounded_int(low: int, high: int, name: str) -> Callable[[str], int]:
    """An argparse type: a whole number from low to high, checked when parsed; name is what argparse's error calls
    it ("invalid NAME value: 'x'")."""

    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise ValueError(text)
        return value

    parse.__name__ = name
    return parse


@contextlib.contextmanager
def opened_catalog(args=None, *, readonly: bool, create: bool = False, path=None, optional: bool = False,
                   shared: bool = False, origin: str | None = None) -> Iterator:  # fmt: skip
    """The catalog --catalog (or $VAULT_CATALOG, or the XDG default) names, or the one at path (origin: what named
    it, as config.catalog_origin says); closed when the block ends, by an error or Ctrl-C too. optional: a
    missing catalog is None, not CatalogMissing. shared: a read-only connection any thread may use (`vault mount`
    answers from many FUSE threads)."""
    from cloudvault import config
    from cloudvault.catalog.db import catalog_opened

    where, origin = config.catalog_origin(args.catalog) if path is None else (path, origin)
    named_by = config.NAMED_BY.get(origin, "the catalog")  # a path given without its origin: named plainly
    with catalog_opened(where, readonly=readonly, create=create, named_by=named_by, shared=shared,
                        optional=optional) as conn:  # fmt: skip
        yield conn


def with_catalog(*, readonly: bool | Callable[[object], bool], create: bool = False) -> Callable:
    """A command's run(args, conn), given the catalog opened (readonly: a bool, or a function of args) and
    closed after it: `@with_catalog(readonly=True)` over `def run(args, conn) -> int`."""

    def decorate(run: Callable[..., int]) -> Callable[[object], int]:
        @functools.wraps(run)
        def run_with_catalog(args) -> int:
            read_only = readonly(args) if callable(readonly) else readonly
            with opened_catalog(args, readonly=read_only, create=create) as conn:
                return run(args, conn)

        return run_with_catalog

    return decorate
