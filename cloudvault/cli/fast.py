"""The fast path: `search`, `extract` and `index` parsed without Typer, so those processes start small.

The Typer app still defines both commands (for --help and the docs); a test checks the two agree on options.
"""

from __future__ import annotations

import argparse
import importlib

FAST_COMMANDS = {
    "search": "cloudvault.cli.search",
    "extract": "cloudvault.cli.extract",
    "index": "cloudvault.cli.index",
}


class QuietParser(argparse.ArgumentParser):
    """Bad options are not reported here: the Typer app parses them again and explains."""

    def error(self, message: str):
        raise ValueError(message)


def split_catalog(argv: list[str]) -> tuple[str | None, list[str]]:
    """`--catalog P` / `--catalog=P` before the command, and the rest."""
    if argv[:1] == ["--catalog"] and len(argv) > 1:
        return argv[1], argv[2:]
    if argv and argv[0].startswith("--catalog="):
        return argv[0].split("=", 1)[1], argv[1:]
    return None, argv


def fast_runner(argv: list[str]):
    """A runner for a fast command, or None to let Typer handle argv (help, other commands, bad options)."""
    catalog, args = split_catalog(argv)
    if not args or args[0] not in FAST_COMMANDS or any(a in ("-h", "--help") for a in args[1:]):
        return None
    module = importlib.import_module(FAST_COMMANDS[args[0]])
    try:
        ns, rest = module.build_parser().parse_known_args(args[1:])
    except ValueError:
        return None
    return None if rest else module.fast_runner(catalog, ns)
