"""One grammar for every command: each has help, options are never abbreviated, bad input is one line + a code."""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloudvault import errors
from cloudvault.cli.main import COMMANDS, build_parser, main

DOCUMENTED = set(errors.EXIT_CODES)


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by its full name ('search', 'restore env' ...)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix}{name}".strip()] = sub
                    walk(sub, f"{prefix}{name} ")

    walk(build_parser(), "")
    return found


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.dest != "help"]


def test_every_command_has_help_and_every_option_explains_itself():
    parsers = command_parsers()
    assert set(COMMANDS) <= set(parsers)
    for name, parser in parsers.items():
        assert parser.description and len(parser.description) > 20, name
        for action in options(parser) + [a for a in parser._actions if not a.option_strings]:
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help, f"vault {name} {action.option_strings or action.dest} has no help"


def test_every_long_option_is_documented_in_the_command_pages():
    """In the prose and examples of docs/commands/*.md (or a topic page of docs/, as mount.md, envs.md, repro.md),
    not only in the usage block copied from --help."""
    docs = REPO / "docs"
    pages = sorted(docs.glob("commands/*.md")) + sorted(docs.glob("*.md"))
    text = "\n".join(re.sub(r"## Usage\n\n```text\n.*?```", "", p.read_text(), flags=re.S) for p in pages)
    missing = []
    for name, parser in command_parsers().items():
        for action in options(parser):
            longs = [o for o in action.option_strings if o.startswith("--") and o != "--json"]
            if longs and not any(re.search(re.escape(o) + r"\b", text) for o in longs):
                missing.append(f"vault {name} {longs[0]}")
    assert not missing, "options not in docs/commands or docs/*.md: " + ", ".join(missing)


def test_help_of_every_command_exits_0(vault):
    for name in command_parsers():
        r = vault(*name.split(), "--help")
        assert r.code == 0 and "usage: vault" in r.out, name
    top = vault("--help")
    assert top.code == 0 and all(f"{code:>3}  " in top.out for code in errors.EXIT_CODES)


def test_no_command_accepts_an_abbreviated_option(vault):
    for name, parser in command_parsers().items():
        for action in options(parser):
            long = next((o for o in action.option_strings if o.startswith("--") and len(o) > 5), None)
            if long is None:
                continue
            r = vault(*name.split(), long[:-2], "x")
            assert r.code == errors.USAGE, (name, long[:-2], r.err)
            assert r.err.count("\n") == 1 and "Traceback" not in r.err


def test_usage_errors_are_one_line_exit_2_and_json_when_asked(vault):
    for argv in (["search"], ["search", "--limit", "x", "granite"], ["extract", "018"], ["index", "--workers", "0"],
                 ["verify", "--sample", "1e-9"], ["verify", "--sample", "nan"], ["optimize", "--max-gb", "nan"],
                 ["nosuchcommand"], ["index", ""]):  # fmt: skip
        r = vault(*argv)
        assert r.code == errors.USAGE, (argv, r.err)
        assert r.err.startswith("vault: error: ") and r.err.count("\n") == 1, (argv, r.err)
    r = vault("search", "--json", "--limit", "-3", "granite")
    assert r.code == errors.USAGE and '"exit_code": 2' in r.out


# -- fuzz: any argv a user can type ends in a documented exit code and never a traceback --------------------------
VALUES = st.one_of(
    st.sampled_from(["", " ", "0", "-1", "nan", "inf", "1e-9", "99999999999999999999", "5%", "018", "014", "*", "..",
                     "/", "-", "--", "x.tar.zst/inner", "018_aicluster_breakdown_debugger/"]),
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12),  # argv has no NUL
)  # fmt: skip
READ_COMMANDS = ["search", "show", "ls", "extract", "verify"]


@st.composite
def argvs(draw, paths: dict[str, str]):
    name = draw(st.sampled_from(READ_COMMANDS))
    parser = command_parsers()[name]
    argv = [name]
    for action in options(parser):
        if action.dest in ("output",):
            argv += draw(st.sampled_from([[], ["-o", paths["out"]], ["-o", paths["file"]], ["-o", "-"]]))
        elif draw(st.booleans()):
            argv.append(action.option_strings[-1])
            if action.nargs != 0:
                argv.append(draw(VALUES))
    argv += draw(st.lists(st.one_of(VALUES, st.sampled_from(list(paths.values()))), max_size=3))
    return argv


@pytest.fixture(scope="module")
def fuzz_paths(tmp_path_factory, demo_mirror):
    from cloudvault.cli.main import run_command

    work = tmp_path_factory.mktemp("fuzz")
    db = work / "catalog.db"
    run_command(["--catalog", str(db), "index", "-q", "--mirror", "marvell_cloud", str(demo_mirror)])
    (work / "afile").write_text("x")
    return {"db": str(db), "out": str(work / "out"), "file": str(work / "afile"), "missing": str(work / "nope")}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_argv_ends_in_a_documented_exit_code_without_traceback(fuzz_paths, capsys, monkeypatch, data):
    monkeypatch.chdir(Path(fuzz_paths["db"]).parent)  # `extract` with no -o writes here (--salvage: a whole entry)
    argv = data.draw(argvs(fuzz_paths))
    code = main(["--catalog", fuzz_paths["db"], *argv])  # an unexpected exception fails the test with its traceback
    out, err = capsys.readouterr()
    assert code in DOCUMENTED, (argv, code, err)
    assert "Traceback" not in err
    if code not in (0, 1):
        assert err.startswith("vault: error: ") and err.count("\n") == 1, (argv, err)
    shutil.rmtree(fuzz_paths["out"], ignore_errors=True)


def test_each_command_summary_is_one_whole_line():
    """The first docstring line is the summary `vault --help` shows: it must stand alone, not run on."""
    import importlib

    for name, module in COMMANDS.items():
        lines = (importlib.import_module(module).__doc__ or "").strip().splitlines()
        assert lines and lines[0].endswith((".", "`.")), name
        assert len(lines) == 1 or not lines[1].strip(), f"vault {name}: the summary runs onto a second line"


@pytest.mark.parametrize("argv", [
    ["search", "--limit", "99999999999999999999", "granite"],
    ["search", "--limit", "-99999999999999999999", "granite"],
    ["verify", "--sample", "99999999999999999999", "013"],
    ["verify", "--sample", "5%", "--seed", "99999999999999999999", "013"],
])  # fmt: skip
def test_numbers_beyond_sqlite_integers_are_handled(fuzz_paths, capsys, argv):
    """Found by the fuzz test: a --limit past 2**63 reached SQLite and ended in a traceback."""
    code = main(["--catalog", fuzz_paths["db"], *argv])
    err = capsys.readouterr().err
    assert code in (0, 2, 5) and "Traceback" not in err, (code, err)
