"""Every command's --json is documented and checked against a real run: each command whose grammar has --json
has `json fields` blocks in its docs/commands/ page, and each block is the snapshot of some test's check()
(tests/cli/json_shapes.py) of a real run's document."""

from __future__ import annotations

import ast
import re

from conftest import REPO

DOCS = REPO / "docs" / "commands"


def _parsers():
    """(page, parser) of every command, restore's two kinds and index's slurm modes."""
    from cloudvault.cli.main import COMMANDS, build_parser

    def choices(parser):
        return next((a.choices for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"), {})

    for name in COMMANDS:
        command = choices(build_parser(only=name))[name]
        yield f"{name}.md", command
        for kind, parser in choices(command).items():  # restore env|docker have pages of their own
            yield (f"{name}-{kind}.md" if name == "restore" else f"{name}.md"), parser
    slurm = choices(choices(build_parser(only="index", verb="slurm"))["index"])["slurm"]
    yield from (("index.md", p) for p in choices(slurm).values())


def _blocks() -> set[tuple[str, str]]:
    return {(page.name, name) for page in DOCS.glob("*.md")
            for name in re.findall(r"```text\njson fields: (.*)\n", page.read_text())}  # fmt: skip


def _checked() -> set[tuple[str, str]]:
    """(page, block) of every check(document, "page", "block") call in the tests."""
    found = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check" and len(node.args) == 3:
                page, name = node.args[1:]
                if isinstance(page, ast.Constant) and isinstance(name, ast.Constant):
                    found.add((page.value, name.value))
    return found


def test_every_command_with_json_documents_it():
    with_json = {page for page, parser in _parsers() if any("--json" in a.option_strings for a in parser._actions)}
    documented = {page for page, _ in _blocks()}
    assert len(with_json) >= 18  # the walk reads the grammar it should
    assert with_json - documented == set()


def test_every_documented_json_block_is_checked_against_a_real_run():
    blocks = _blocks()
    assert len(blocks) >= 30
    assert blocks - _checked() == set()
