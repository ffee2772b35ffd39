"""The command lines vault's own messages and docstrings name (`vault verify`, `vault index slurm resume`, `vault
optimize --status`) are written outside cli/ too, as text for the user; each must still parse under today's
grammar, so renaming a command, a sub-verb or a flag turns this test red and names every stale hint."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[3] / "cloudvault"
HINT = re.compile(r"`vault( [^`{}]*)?`")  # an f-string's `vault {name}` is built from the grammar: left out


def _choices(parser) -> dict:
    """A parser's sub-commands (argparse keeps them in its subparsers action)."""
    return next((a.choices for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"), {})


def _flags(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def hint_problems(hint: str) -> list[str]:
    """What in one `vault ...` command line today's grammar does not know."""
    from cloudvault.cli.main import COMMANDS, SUB_VERBS, build_parser

    words = hint.split()[1:]
    if words and (words[0] == "..." or words[0].isupper()):  # `vault NAME ...`: any command, as help says
        return []
    if not words or words[0].startswith("-"):
        parser = build_parser(only="")
    elif words[0] not in COMMANDS:
        return [f"no command {words[0]!r}"]
    else:
        command, rest = words[0], words[1:]
        verb = rest[0] if rest and rest[0] in SUB_VERBS.get(command, {}) else None
        parser = _choices(build_parser(only=command, verb=verb))[command]
        for word in rest[: 2 if verb else 1]:  # a kind (restore env), or a sub-verb and its mode (index slurm plan)
            parser = _choices(parser).get(word.split("|")[0], parser)
    known = _flags(parser)
    return [f"{hint}: no flag {w.split('=')[0]}" for w in words if w.startswith("--") and w.split("=")[0] not in known]


def hints() -> list[tuple[str, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for match in HINT.finditer(path.read_text()):
            found.append((path.relative_to(PACKAGE).as_posix(), match.group(0).strip("`")))
    return found


def test_every_command_line_vault_names_parses_under_todays_grammar():
    found = hints()
    assert len(found) > 200  # the scan reads what it should: about 300 hints
    problems = sorted({f"{where}: {p}" for where, hint in found for p in hint_problems(hint)})
    assert problems == []


@pytest.mark.parametrize(("hint", "problem"), [
    ("vault verfy 018", "no command 'verfy'"),
    ("vault optimize --stat", "vault optimize --stat: no flag --stat"),
    ("vault index slurm resume --tasks 4", "vault index slurm resume --tasks 4: no flag --tasks"),
    ("vault restore env nebius --lst", "vault restore env nebius --lst: no flag --lst"),
])  # fmt: skip
def test_the_check_sees_a_stale_command_or_flag(hint, problem):
    assert hint_problems(hint) == [problem]


@pytest.mark.parametrize("hint", ["vault index slurm plan --tasks 4", "vault restore env nebius --list",
                                  "vault --help", "vault optimize --status", "vault extract ... -o -"])  # fmt: skip
def test_the_check_takes_a_line_the_grammar_takes(hint):
    assert hint_problems(hint) == []
