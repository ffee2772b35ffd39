"""What the commands share lives once in cli/common.py: the catalog each opens (closed however the command ends,
an error or Ctrl-C too) and the output options --json and --quiet (one definition, one help text)."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
from pathlib import Path

import pytest

from cloudvault import errors
from cloudvault.cli import common
from cloudvault.cli.main import main
from unit.cli.test_grammar import command_parsers

CLI = Path(common.__file__).parent


def test_no_command_module_but_common_opens_a_catalog_itself():
    """One opener, so one place closes: a command calling open_catalog (or sqlite3.connect) directly is the
    connection that stays open when it fails half-way."""
    opening = re.compile(r"\b(open_catalog|open_shared_reader|sqlite3\.connect)\(")
    offenders = [f"{p.name}:{n}: {line.strip()}" for p in sorted(CLI.glob("*.py")) if p.name != "common.py"
                 for n, line in enumerate(p.read_text().splitlines(), 1) if opening.search(line)]  # fmt: skip
    assert not offenders, "open the catalog through cli.common.opened_catalog / with_catalog:\n" + "\n".join(offenders)


def test_json_and_quiet_come_from_the_one_shared_definition():
    parsers = command_parsers()
    with_json = {name for name, p in parsers.items() for a in p._actions if "--json" in a.option_strings}
    with_quiet = {name for name, p in parsers.items() for a in p._actions if "--quiet" in a.option_strings}
    # not vacuous: the commands that print documents, and the two with progress bars worth silencing
    assert {"search", "show", "ls", "extract", "verify", "compare", "runs", "repro", "restore env", "demo"} <= with_json
    assert {"index", "restore docker"} <= with_quiet <= with_json
    for name, parser in parsers.items():
        for action in parser._actions:
            if "--json" in action.option_strings:
                assert (action.option_strings, action.help) == (["--json"], common.JSON_HELP), name
            if "--quiet" in action.option_strings or "-q" in action.option_strings:
                assert (action.option_strings, action.help) == (["-q", "--quiet"], common.QUIET_HELP), name
    defines = re.compile(r"add_argument\(\s*([\"']-q[\"']\s*,\s*)?[\"'](--json|--quiet)[\"']")
    by_hand = [p.name for p in CLI.glob("*.py") if p.name != "common.py" and defines.search(p.read_text())]
    assert not by_hand, f"--json/--quiet defined by hand in {by_hand}: use common.add_output_options"


def test_help_of_a_command_with_the_shared_options_names_them(vault):
    r = vault("restore", "docker", "--help")
    assert r.code == 0 and "-q, --quiet" in r.out and common.QUIET_HELP in r.out and common.JSON_HELP in r.out


class Connections:
    """Every catalog connection vault opens in this process, kept referenced (so CPython cannot close a leaked
    one for the command when its last reference goes), and the file descriptors open on the catalog's files."""

    def __init__(self, monkeypatch, db: Path) -> None:
        from cloudvault.catalog import db as catalog_db

        self.db, self.opened = db, []
        for name in ("open_catalog", "open_shared_reader"):
            real = getattr(catalog_db, name)
            monkeypatch.setattr(catalog_db, name, self._spy(real))

    def _spy(self, real):
        def opened(*args, **kwargs):
            conn = real(*args, **kwargs)
            self.opened.append(conn)
            return conn

        return opened

    def still_open(self) -> int:
        left = 0
        for conn in self.opened:
            try:
                conn.execute("SELECT 1")
                left += 1
            except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
                pass
        return left

    def fds_on_catalog(self) -> list[str]:
        names = (str(self.db), f"{self.db}-wal", f"{self.db}-shm")
        found = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:  # the listing's own descriptor, gone by now
                continue
            if target in names:
                found.append(target)
        return found


# Each fails after its catalog is open: an entry, member, env or run that is not there, a bad definition
FAILING_MIDWAY = [
    ["show", "nope"],
    ["ls", "nope"],
    ["search", "granite", "--entry", "nope"],
    ["extract", "018", "no/such/member.json", "-o", "{tmp}/out"],
    ["verify", "nope"],
    ["runs", "nope"],
    ["optimize", "nope"],
    ["compare", "014", "nope"],
    ["index", "--mirror", "no_such_definition"],
    ["restore", "env", "nebius", "nosuchenv", "--list"],
    ["repro", "014_ss20_temp0", "--dry-run", "--out", "{tmp}/runs"],  # preflight: no GPU, no model here
]
SUCCEEDING = [["optimize", "--status", "--to", "{tmp}/cache"], ["restore", "env", "nebius", "--list"]]


@pytest.mark.parametrize("argv", FAILING_MIDWAY + SUCCEEDING, ids=" ".join)
def test_a_command_leaves_no_catalog_connection_open_however_it_ends(demo_catalog, tmp_path, monkeypatch, argv):
    connections = Connections(monkeypatch, demo_catalog)
    assert connections.fds_on_catalog() == []
    code = main(["--catalog", str(demo_catalog), *(a.format(tmp=tmp_path) for a in argv)])
    assert code in errors.EXIT_CODES and (code != errors.OK) == (argv in FAILING_MIDWAY)
    assert connections.opened, "the command never opened the catalog: it tests nothing"
    assert connections.still_open() == 0 and connections.fds_on_catalog() == []


@pytest.mark.parametrize("argv", [["show", "014"], ["search", "granite", "--entry", "014"], ["ls", "018"],
                                  ["extract", "018", "compaction_meta.json", "-o", "{tmp}/out"]],
                         ids=" ".join)  # fmt: skip
def test_ctrl_c_in_the_middle_of_a_command_closes_its_catalog(demo_catalog, tmp_path, monkeypatch, argv):
    """A real SIGINT, delivered while the command holds its catalog open (as it resolves the entry)."""
    from cloudvault.catalog import query

    real = query.resolve_entry

    def interrupted(*args, **kwargs):
        found = real(*args, **kwargs)
        signal.raise_signal(signal.SIGINT)  # main's handler turns it into Interrupted, as at a terminal
        return found

    monkeypatch.setattr(query, "resolve_entry", interrupted)
    connections = Connections(monkeypatch, demo_catalog)
    code = main(["--catalog", str(demo_catalog), *(a.format(tmp=tmp_path) for a in argv)])
    assert code == errors.INTERRUPTED
    assert connections.opened and connections.still_open() == 0 and connections.fds_on_catalog() == []


def test_a_command_that_fails_midway_leaves_the_catalog_free_for_a_writer(demo_catalog, monkeypatch):
    """Seen as SQLite sees it: right after main() returns, an exclusive lock on the catalog is granted at once."""
    Connections(monkeypatch, demo_catalog)  # what vault opened stays referenced: only close() releases it
    assert main(["--catalog", str(demo_catalog), "optimize", "nope"]) == errors.NOT_FOUND
    other = sqlite3.connect(demo_catalog, timeout=0)
    try:
        other.execute("PRAGMA locking_mode = EXCLUSIVE")
        other.execute("BEGIN EXCLUSIVE")
        other.execute("ROLLBACK")
    finally:
        other.close()
