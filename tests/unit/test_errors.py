"""Errors the system or SQLite raise end in one line that says what happened, by kind, with its exit code: a
locked catalog is not a damaged one, a full disk is not a refused permission, and a malformed mirror definition is
a line naming the file, never a traceback."""

from __future__ import annotations

import errno
import sqlite3

import pytest

from cloudvault import errors
from cloudvault.catalog.db import open_catalog
from cloudvault.cli import main as cli_main


def locked_error(path) -> sqlite3.OperationalError:
    """The error SQLite really raises when another connection holds the write lock."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE IF NOT EXISTS t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        sqlite3.connect(path, timeout=0).execute("INSERT INTO t VALUES (1)")
    except sqlite3.OperationalError as exc:
        return exc
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    raise AssertionError("the second writer was not refused")


def test_every_message_is_one_line_however_its_template_or_fields_wrap():
    error = errors.CatalogDamaged(path="/c.db", detail="first\nsecond\r\n  third")
    assert error.message == "catalog /c.db is damaged (first second third); restore it from a copy, or move it " \
        "aside and rebuild it with `vault index`"  # fmt: skip
    assert "\n" not in errors.CatalogTooOld(path="/c.db", found=3, supported=4).message  # its docstring wraps


def test_a_locked_catalog_is_busy_and_says_retry_not_damaged(tmp_path):
    error = errors.from_sqlite(locked_error(tmp_path / "c.db"), tmp_path / "c.db")
    assert isinstance(error, errors.CatalogLocked) and error.exit_code == errors.ENVIRONMENT
    assert "retry" in error.message and "damaged" not in error.message


def test_only_a_damaged_file_is_damaged_exit_5(tmp_path):
    garbage = tmp_path / "c.db"
    garbage.write_bytes(b"SQLite format 3\0" + b"this is not a database, it is sixteen bytes and more" * 100)
    with pytest.raises(errors.CatalogDamaged) as damaged:
        open_catalog(garbage)
    assert damaged.value.exit_code == errors.INTEGRITY and "restore it from a copy" in damaged.value.message
    text = tmp_path / "notes.txt"
    text.write_bytes(b"this is not a database, it is sixteen bytes and more" * 100)
    with pytest.raises(errors.NotACatalog) as not_one:  # never "damaged": rebuilding it would not help
        open_catalog(text)
    assert not_one.value.exit_code == errors.USAGE and "is not a vault catalog" in not_one.value.message
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorname = "SQLITE_FULL"
    assert isinstance(errors.from_sqlite(full, garbage), errors.DiskFull)


@pytest.mark.parametrize(
    ("number", "kind", "words"),
    [
        (errno.ENOSPC, errors.DiskFull, "no space left"),
        (errno.EACCES, errors.PermissionRefused, "permission denied"),
        (errno.EPERM, errors.PermissionRefused, "permission denied"),
        (errno.ENOENT, errors.PathMissing, "no such file or folder"),
        (errno.ELOOP, errors.SystemRefused, "Too many levels of symbolic links"),
    ],
)
def test_an_os_error_is_one_line_by_its_errno_naming_the_file(number, kind, words):
    import os

    error = errors.from_os_error(OSError(number, os.strerror(number), "/data/c.db"))
    assert isinstance(error, kind) and error.exit_code == errors.ENVIRONMENT
    assert words in error.message and "/data/c.db" in error.message and "\n" not in error.message


@pytest.mark.parametrize(
    ("raised", "code", "words"),
    [
        (PermissionError(errno.EACCES, "Permission denied", "/srv/out"), 6, "permission denied: /srv/out"),
        (OSError(errno.ENOSPC, "No space left on device", "/srv/out/x"), 6, "no space left on the device holding"),
    ],
)
def test_the_cli_reports_an_unforeseen_os_error_in_one_line(monkeypatch, capsys, raised, code, words):
    def refuses(argv):
        raise raised

    monkeypatch.setattr(cli_main, "run_command", refuses)
    assert cli_main.main(["search", "x"]) == code
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_cli_reports_a_locked_catalog_as_busy_exit_6_naming_it(monkeypatch, capsys, tmp_path):
    locked = locked_error(tmp_path / "other.db")

    def refuses(argv):
        raise locked

    monkeypatch.setattr(cli_main, "run_command", refuses)
    assert cli_main.main(["--catalog", str(tmp_path / "c.db"), "search", "x"]) == 6
    err = capsys.readouterr().err
    assert f"catalog {tmp_path / 'c.db'} is locked" in err and "retry" in err and "damaged" not in err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("roots = ['/m']\n", "needs name"),
        ("name = 'm'\nroots = '/m'\n", "roots must be a list"),
        ("name = 'm'\n[secrets]\nkey = 3\n", "secrets must be a table"),
        ("name = 'm'\nentry_pattern = '('\n", "entry_pattern is not a regular expression"),
        ("name = = 'm'\n", "not valid TOML"),
    ],
)
def test_a_malformed_mirror_definition_is_one_line_naming_it(tmp_path, vault, text, words):
    definition = tmp_path / "mine.toml"
    definition.write_text(text)
    r = vault("--catalog", str(tmp_path / "c.db"), "index", "--mirror", str(definition), "-q")
    assert r.code == errors.USAGE and words in r.err and str(definition) in r.err, r.err
    assert "Traceback" not in r.err and r.err.count("\n") == 1


def test_every_error_exits_with_its_groups_code_and_every_code_is_in_the_table():
    """A group names its exit code in its class line; each error under it (and its own subgroups') inherits it."""
    groups = {errors.UsageError: errors.USAGE, errors.NotFound: errors.NOT_FOUND, errors.Ambiguous: errors.AMBIGUOUS,
              errors.IntegrityError: errors.INTEGRITY, errors.EnvironmentProblem: errors.ENVIRONMENT,
              errors.Prerequisite: errors.PREREQUISITE, errors.Interrupted: errors.INTERRUPTED}  # fmt: skip
    assert {group: group.exit_code for group in groups} == groups
    assert (errors.RecipeInvalid.exit_code, errors.MemberNotFound.exit_code, errors.CatalogDamaged.exit_code,
            errors.CatalogLocked.exit_code, errors.ExtraMissing.exit_code) == (2, 3, 5, 6, 7)  # fmt: skip
    assert errors.VaultError.exit_code == errors.USAGE and errors.Signalled(15).exit_code == errors.TERMINATED

    def every(cls):
        return [cls] + [c for sub in cls.__subclasses__() for c in every(sub)]

    assert {c.exit_code for c in every(errors.VaultError)} <= set(errors.EXIT_CODES)
