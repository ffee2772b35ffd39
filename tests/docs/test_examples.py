"""Every example in docs/, recipes/README.md and every command's --help runs as written after `vault demo`.

An example is a `$ vault ...` line in a fenced block of a page, or an indented `vault ...` line of a --help text
(its description follows after two spaces). A page's example shows its output under it, up to the next `$` line:
each line must be printed, up to a trailing `...` (times and rates may differ). Its comment (`# ...` on a page,
the description in --help) may say `exit N` (the exit codes it may end with, 0 when it names none) or
`needs: WHAT` (a service or machine the demo has not: it is not run here, and says why).
Each page's examples (and the --help examples) run in order in a copy of the home `vault demo` left, where its
catalog is the default, as a newcomer would run them; `~` is that home, as a shell would expand it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from conftest import REPO

PAGES = [*sorted((REPO / "docs").rglob("*.md")), REPO / "recipes" / "README.md"]


@dataclass
class Example:
    where: str  # page:line, or `vault COMMAND --help`
    argv: list[str]
    exits: set[int]
    needs: str | None
    shown: list[str] = field(default_factory=list)


def parse(where: str, line: str, comment: str) -> Example:
    """One example from its command line (cut at a pipe) and its comment."""
    command = line.split(" | ", 1)[0].strip()
    needs = re.search(r"\bneeds: (.+)", comment)
    exits = {int(n) for n in re.findall(r"\bexit (\d+)\b", comment)} or {0}
    return Example(where, shlex.split(command)[1:], exits, needs.group(1).strip() if needs else None)


def page_examples(path: Path) -> list[Example]:
    """The `$ vault` lines of the page's fenced blocks, each with the lines shown under it."""
    found, current, fenced = [], None, False
    for n, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if text.startswith("```"):
            fenced, current = not fenced, None
        elif fenced and text.startswith("$ vault "):
            body = text[2:]
            cut = re.search(r"\s#(\s|$)", body)
            command, comment = (body[: cut.start()], body[cut.start() :]) if cut else (body, "")
            current = parse(f"{path.relative_to(REPO)}:{n}", command, comment)
            found.append(current)
        elif fenced and text.startswith("$ "):
            current = None
        elif current is not None:
            current.shown.append(line)
    return found


def help_examples(make_usage) -> list[Example]:
    """The indented `vault ...` lines of every command's --help."""
    found = []
    for words in make_usage.commands():
        for line in make_usage.help_text(words).splitlines():
            example = re.match(r"^\s+(vault \S.*?)(?:\s{2,}(.*))?$", line)
            if example:
                found.append(parse(f"vault {' '.join(words)} --help", example.group(1), example.group(2) or ""))
    return found


VOLATILE = [(re.compile(r"\d{8}T\d{6}Z"), "<time>"), (re.compile(r"\d{4}-\d\d-\d\dT[\d:]+\+00:00"), "<time>"),
            (re.compile(r"\d+\.\d+ s\b"), "<secs>"), (re.compile(r"[\d.]+ [KMG]?B/s\b"), "<rate>")]  # fmt: skip


def normal(text: str) -> str:
    """Text less what differs from run to run: times, durations, rates."""
    for pattern, word in VOLATILE:
        text = pattern.sub(word, text)
    return text


def run_all(examples: list[Example], demo_home: Path, copy: Path, vault, monkeypatch) -> list[str]:
    """Run each example in copy, a fresh copy of the home `vault demo` left; what went wrong, one line each."""
    shutil.copytree(demo_home, copy, symlinks=True)
    monkeypatch.setenv("HOME", str(copy))
    monkeypatch.setenv("XDG_DATA_HOME", str(copy / ".local" / "share"))
    monkeypatch.chdir(copy)
    wrong = []
    for example in examples:
        if example.needs:
            continue
        argv = [os.path.expanduser(a) if a.startswith("~") else a for a in example.argv]
        result = vault(*argv)
        if result.code not in example.exits:
            wrong.append(f"{example.where}: vault {shlex.join(example.argv)} exited {result.code}, "
                         f"not {sorted(example.exits)}: {(result.err or result.out).strip()[-300:]}")  # fmt: skip
            continue
        printed = normal((result.out + result.err).replace(str(copy), "~"))
        for line in example.shown:  # a line ending in "..." is shown up to there
            shown = line.strip().removesuffix("...").rstrip()
            if shown and normal(shown) not in printed:
                wrong.append(f"{example.where}: vault {shlex.join(example.argv)} did not print: {line.strip()}")
    return wrong


def test_every_docs_example_runs_as_written_after_vault_demo(in_demo_home, vault, tmp_path, monkeypatch):
    wrong, count = [], 0
    for path in PAGES:
        examples = page_examples(path)
        count += len(examples)
        if examples:
            copy = tmp_path / path.relative_to(REPO).as_posix().replace("/", "_")
            wrong += run_all(examples, in_demo_home, copy, vault, monkeypatch)
    assert not wrong, "\n".join(wrong)
    assert count >= 40


def test_every_help_example_runs_as_written_after_vault_demo(in_demo_home, vault, make_usage, tmp_path, monkeypatch):
    examples = help_examples(make_usage)
    assert len(examples) >= 8
    wrong = run_all(examples, in_demo_home, tmp_path / "help", vault, monkeypatch)
    assert not wrong, "\n".join(wrong)


def test_every_command_line_in_the_docs_is_an_example():
    """A `vault ...` line in a code block without its `$` would never be run: each command line says `$ vault`."""
    bare = []
    for path in PAGES:
        fence = None  # the line that opened the block we are in
        for n, line in enumerate(path.read_text().splitlines(), 1):
            text = line.strip()
            if text.startswith("```"):
                fence = text if fence is None else None
            # ```text blocks hold output and --help (whose examples run above); an indented block is code too
            elif (fence not in (None, "```text") or (fence is None and line.startswith("    "))) and (
                text.startswith("vault ")
            ):
                bare.append(f"{path.relative_to(REPO)}:{n}: {text}")
    assert not bare, "\n".join(bare)


def test_an_example_says_what_it_needs_and_how_it_ends():
    example = parse("x", "vault restore docker tandemspec", "# needs: a docker daemon (DOCKER_HOST)")
    assert example.argv == ["restore", "docker", "tandemspec"] and example.needs == "a docker daemon (DOCKER_HOST)"
    assert parse("x", "vault repro x --dry-run", "# exit 6 without a GPU, exit 7 without torch").exits == {6, 7}
    assert parse("x", "vault extract 018 a.json -o - | jq .", "").argv == ["extract", "018", "a.json", "-o", "-"]
