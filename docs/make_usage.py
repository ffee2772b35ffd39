"""Write the Usage blocks of docs/commands/*.md from `vault COMMAND --help`: `python docs/make_usage.py` rewrites
them, `--check` only says which differ (exit 1). Every command of the grammar (cli/main.py COMMANDS and their
sub-commands: each kind of `vault restore` ...) has a page; a page's `## Usage` section holds one ```text block
per command it documents, in the grammar's order (a new command without a page gets one)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

PAGES = Path(__file__).resolve().parent / "commands"
WIDTH = "80"  # the columns the help is formatted for: a terminal's default, and what fits a page
SHARED_PAGES = {("umount",): "mount"}  # a command documented on another command's page


def commands() -> list[tuple[str, ...]]:
    """Every command a user can run, as its words: ('index',), ('restore', 'env') ..., in `vault --help` order."""
    from cloudvault.cli.main import SUB_VERBS, build_parser

    found = []

    def walk(parser, words):
        groups = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
        if words and not any(g.required for g in groups):  # runnable: no sub-command, or one it can go without
            found.append(words)
        for group in groups:
            for name, sub in group.choices.items():
                walk(sub, (*words, name))

    walk(build_parser(), ())
    for name, verbs in SUB_VERBS.items():  # `vault index slurm ...`: a grammar of its own, after the command's
        for verb in verbs if (name,) in found else ():
            walk(_sub(_sub(build_parser(only=name, verb=verb), name), verb), (name, verb))
    return found


def _sub(parser, word: str):
    """The parser of a sub-command word under parser."""
    group = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return group.choices[word]


def help_text(words: tuple[str, ...]) -> str:
    """`vault WORDS --help` as a terminal of WIDTH columns prints it."""
    from cloudvault.cli.main import SUB_VERBS, build_parser

    verb = words[1] if words[1:] and words[1] in SUB_VERBS.get(words[0], {}) else None
    parser = build_parser(only=words[0], verb=verb) if verb else build_parser(only=words[0])
    for word in words:
        parser = _sub(parser, word)
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return parser.format_help().rstrip("\n")
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def page(words: tuple[str, ...]) -> Path:
    """The page documenting a command: its own (`restore-env.md`), else its parent command's when that has one
    (`vault mirrors rm` on `mirrors.md`), else a new page of its own."""
    if words in SHARED_PAGES:
        return PAGES / f"{SHARED_PAGES[words]}.md"
    for n in range(len(words), 0, -1):
        if (PAGES / f"{'-'.join(words[:n])}.md").exists():
            return PAGES / f"{'-'.join(words[:n])}.md"
    return PAGES / f"{'-'.join(words)}.md"


def usage_blocks(text: str) -> list[str]:
    """The ```text blocks of a page's `## Usage` section, in order."""
    section = re.search(r"^## Usage\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return re.findall(r"^```text\n(.*?)\n```$", section.group(1), re.S | re.M) if section else []


def wanted(path: Path) -> str:
    """The page with its Usage section holding the help of each command it documents (a new section after the
    title and its links when the page has none)."""
    texts = [help_text(words) for words in commands() if page(words) == path]
    blocks = "".join(f"```text\n{t}\n```\n\n" for t in texts)
    text = path.read_text() if path.exists() else f"# vault {path.stem.replace('-', ' ')}\n\n"
    section = re.search(r"^## Usage\n.*?(?=^## |\Z)", text, re.S | re.M)
    if section:
        kept = re.sub(r"^```text\n.*?\n```\n\n?", "", section.group(0), flags=re.S | re.M)
        kept = kept[len("## Usage\n") :].lstrip("\n")
        return (text[: section.start()] + f"## Usage\n\n{blocks}{kept}" + text[section.end() :]).rstrip() + "\n"
    head, _, rest = text.partition("\n\n")
    links, _, rest = rest.partition("\n\n") if rest.startswith("[") else ("", "", rest)
    return "\n\n".join(p for p in (head, links, f"## Usage\n\n{blocks.rstrip()}", rest) if p).rstrip() + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    differ = []
    for path in sorted({page(words) for words in commands()}):
        text = wanted(path)
        if not path.exists() or path.read_text() != text:
            differ.append(path)
            if not check:
                path.write_text(text)
    for path in differ:
        print(f"{'differs' if check else 'wrote'}: {path.relative_to(PAGES.parent.parent)}")
    return 1 if check and differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
