"""Entry point of `vault`: one argparse grammar for every command; errors become one line and an exit code.

Each command is one module in this package (borg / DVC / pip style): its docstring is its help, `add_arguments`
defines every option once, `run(args)` calls one library function. Only the module of the command being run is
imported, so `vault search` starts almost as fast as Python itself.
"""

from __future__ import annotations

import _signal  # `signal` without its enums, whose making costs ~0.7 ms of every start; same handlers, same calls
import gc
import os
import sys

from cloudvault import errors

# name -> module; the order is the order of `vault --help`.
COMMANDS = {
    "index": "cloudvault.cli.index",
    "search": "cloudvault.cli.search",
    "grep": "cloudvault.cli.grep",
    "show": "cloudvault.cli.show",
    "ls": "cloudvault.cli.ls",
    "extract": "cloudvault.cli.extract",
    "verify": "cloudvault.cli.verify",
    "optimize": "cloudvault.cli.optimize",
    "mount": "cloudvault.cli.mount",
    "umount": "cloudvault.cli.umount",
    "restore": "cloudvault.cli.restore",
    "repro": "cloudvault.cli.repro",
    "compare": "cloudvault.cli.compare",
    "runs": "cloudvault.cli.runs",
    "mirrors": "cloudvault.cli.mirrors",
    "log": "cloudvault.cli.log",
    "diff": "cloudvault.cli.diff",
    "browse": "cloudvault.cli.browse",
    "demo": "cloudvault.cli.demo",
    "info": "cloudvault.cli.info",
}

# command -> {word: module}: a sub-verb, parsed by its own grammar when it is the first word after the command
SUB_VERBS = {"index": {"slurm": "cloudvault.cli.index_slurm"}}

DESCRIPTION = "cloudvault: search, extract from, restore and re-run a research group's cloud backup mirror."


def _ngettext(singular: str, plural: str, n: int) -> str:
    return singular if n == 1 else plural


class _English:
    """What argparse takes from gettext (its two functions), for a program that speaks English."""

    gettext = str
    ngettext = staticmethod(_ngettext)


def _import_argparse():
    """argparse, imported with _English standing in for gettext: argparse binds gettext's two functions at import,
    and importing gettext compiles its plural-forms parser, ~0.9 ms of every start. The real gettext stays
    importable by anyone else (the stand-in serves this one import only)."""
    if "argparse" in sys.modules or "gettext" in sys.modules:
        import argparse
    else:
        sys.modules["gettext"] = _English  # type: ignore[assignment]
        try:
            import argparse
        finally:
            del sys.modules["gettext"]
    return argparse


argparse = _import_argparse()
# vault speaks English: argparse's gettext lookups (one search of the locale folders per message, ~40 per start)
# cost more start-up than parsing itself (argparse may have been imported with the real gettext already)
argparse._ = str  # type: ignore[attr-defined]
argparse.ngettext = _ngettext  # type: ignore[attr-defined]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Sized to the terminal only when it formats text. argparse makes a formatter for every add_argument just to
    check a metavar; sizing each one imported shutil (with bz2, lzma and zlib) and asked the terminal, every start."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        self._sized = width is not None
        self._wanted_help_position = max_help_position
        super().__init__(prog, indent_increment, max_help_position, 80 if width is None else width)

    def format_help(self) -> str:
        if not self._sized:  # argparse's own sizing, from a formatter made as argparse would have made this one
            sized = argparse.RawDescriptionHelpFormatter(self._prog, self._indent_increment, self._wanted_help_position)
            self._width, self._max_help_position, self._sized = sized._width, sized._max_help_position, True
        return super().format_help()


class VaultParser(argparse.ArgumentParser):
    """No abbreviated options anywhere; a usage error is one line naming the command's --help, exit 2."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(**kwargs)

    def add_argument(self, *names, **kwargs):
        if names and not names[0].startswith("-") and kwargs.get("nargs") in ("*", "?"):
            kwargs.setdefault("default", [] if kwargs["nargs"] == "*" else None)  # else argparse calls it required
        return super().add_argument(*names, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        found, rest = super().parse_known_args(args, namespace)
        for action in self._actions:  # argparse gives a positional after a second `--` as [], not a string
            if action.nargs is None and not action.option_strings and getattr(found, action.dest, None) == []:
                self.error(f"the following arguments are required: {action.metavar or action.dest}")
        return found, rest

    def error(self, message: str):
        message = message.replace("\n", "\\n").replace("\r", "\\r")  # an argument's newline stays on one line
        import re

        choice = re.match(r"argument COMMAND: invalid choice: '(.*?)'", message)
        if choice:
            import difflib

            near = difflib.get_close_matches(choice.group(1), list(COMMANDS), n=1)
            hint = f"; did you mean `vault {near[0]}`?" if near else ""
            message = f"unknown command {choice.group(1)!r}{hint}"
        # one `vault:` prefix (main adds it), and the help of the command the mistake was made in
        raise errors.UsageError(detail=f"{message} (see `{self.prog} --help`)")


def command_module(name: str):
    __import__(COMMANDS[name])  # not importlib.import_module: importing importlib is a cost of every start
    return sys.modules[COMMANDS[name]]


def summary(module) -> str:
    return (module.__doc__ or "").strip().splitlines()[0]


def build_parser(only: str | None = None, verb: str | None = None) -> VaultParser:
    """The whole grammar; with only (a command named in argv), just that command's part of it; with verb (its
    sub-verb, SUB_VERBS), the sub-verb's grammar in place of the command's own."""
    from cloudvault import __version__

    parser = VaultParser(prog="vault", description=DESCRIPTION, epilog="exit codes:\n" + errors.exit_code_table())
    parser.add_argument("--catalog", help="catalog file (default: $VAULT_CATALOG, else the XDG data dir)")
    parser.add_argument("--version", action="version", version=f"vault {__version__}")
    # prog given: argparse would otherwise format a usage line (sizing the terminal) for a prefix no command uses
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=VaultParser, prog="vault")
    for name in COMMANDS:
        if only is not None and name != only:
            continue  # the command word is known: the others' parsers would only cost start-up
        module = command_module(name)
        doc = (module.__doc__ or "").strip()
        cmd = sub.add_parser(name, help=summary(module).replace("%", "%%"), description=doc, prog=f"vault {name}")
        if verb is not None:
            _add_sub_verb(cmd, name, verb)
            continue
        module.add_arguments(cmd)
        cmd.set_defaults(run=module.run, parser=cmd)
    return parser


def _add_sub_verb(cmd: VaultParser, name: str, verb: str) -> None:
    """`vault NAME VERB ...`: the sub-verb's module defines its grammar (and its runs) under cmd."""
    __import__(SUB_VERBS[name][verb])
    module = sys.modules[SUB_VERBS[name][verb]]
    words = cmd.add_subparsers(dest="sub_verb", metavar=verb, parser_class=VaultParser, prog=f"vault {name}")
    part = words.add_parser(verb, help=summary(module).replace("%", "%%"), description=(module.__doc__ or "").strip(),
                            prog=f"vault {name} {verb}")  # fmt: skip
    part.set_defaults(parser=part)
    module.add_arguments(part)


def _command_name(argv: list[str]) -> str | None:
    """The command word in argv (after the global options), if it is a known one."""
    at = _command_at(argv)
    return argv[at] if at is not None and argv[at] in COMMANDS else None


def _command_at(argv: list[str]) -> int | None:
    """Where argv's first word after the global options is."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--catalog":
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return i
    return None


def _sub_verb(argv: list[str], name: str | None) -> str | None:
    """The command's sub-verb, when the word right after the command is one (`vault index slurm ...`)."""
    at = _command_at(argv)
    following = argv[at + 1] if at is not None and at + 1 < len(argv) else None
    return following if following in SUB_VERBS.get(name, {}) else None


def run_command(argv: list[str]) -> int:
    """Parse argv and run the command; VaultErrors pass through to the caller."""
    name = _command_name(argv)
    parser = build_parser(only=name, verb=_sub_verb(argv, name))
    try:
        args, rest = parser.parse_known_args(argv)
    except errors.UsageError:  # a mistyped option makes argparse take its value for the command: name the option
        _refuse_unknown_option(parser, argv, argv, left_over=False)
        raise
    if rest:  # reported by the command's own parser, naming its own --help
        _refuse_unknown_option(parser, argv, rest, left_over=True)
        (getattr(args, "parser", None) or parser).error(f"unrecognized arguments: {' '.join(rest)}")
    if getattr(args, "run", None) is None:
        parser.print_help()
        return errors.USAGE
    return args.run(args)


def _refuse_unknown_option(parser: VaultParser, argv: list[str], tokens: list[str], left_over: bool) -> None:
    """UsageError for the first of tokens that looks like an option and that neither vault nor the command (as
    argv names it) knows, with the known option nearest to it; a global option argparse left over (left_over:
    tokens are what it could not place: given after the command) says where it goes."""
    import difflib

    chain = _parsers_of(parser, argv)
    known = {name: p for p in reversed(chain) for name in p._option_string_actions}
    for token in tokens:
        if token == "--":
            return
        name = token.split("=", 1)[0]
        if not name.startswith("-") or name == "-" or name[1:2].isdigit():
            continue
        if left_over and known.get(name) is parser and len(chain) > 1:
            parser.error(f"{name} goes before the command: `vault {name} ... {chain[1].prog.removeprefix('vault ')}`")
        if name not in known:
            near = difflib.get_close_matches(name, sorted(o for o in known if o.startswith("--")), n=1)
            hint = f"; did you mean `{near[0]}`?" if near else ""
            (known[near[0]] if near else chain[-1]).error(f"unknown option {name!r}{hint}")  # whose --help says


def _parsers_of(parser: VaultParser, argv: list[str]) -> list:
    """The parser and the subcommand parsers argv's words lead to (vault, vault restore, vault restore env)."""
    chain = [parser]
    for word in argv:
        sub = next((a for a in chain[-1]._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is not None and word in sub.choices:
            chain.append(sub.choices[word])
    return chain


def main(argv: list[str] | None = None) -> int:
    from cloudvault.cli import ui

    argv = sys.argv[1:] if argv is None else argv
    streams = ui.guard_output()  # a reader that leaves drops the output, never the work (`vault ... | head`)
    previous = {sig: _signal.signal(sig, handler) for sig, handler in
                ((_signal.SIGINT, _interrupt), (_signal.SIGTERM, _stop), (_signal.SIGHUP, _stop))}  # fmt: skip
    try:
        try:
            _COMMAND["ended"] = False
            code = run_command(argv)
        finally:  # a stopping signal from here on finds the command ended: let go, never a traceback mid-report
            _COMMAND["ended"] = True
    except errors.VaultError as exc:
        code = _report_error(exc, argv)
    except KeyboardInterrupt:
        _report(errors.Interrupted().message, errors.INTERRUPTED, argv)
        code = errors.INTERRUPTED
    except ui.ReaderLeft:  # `vault extract ... -o - | head -c 10`: what was asked for was read; say nothing more
        code = errors.OK
    except SystemExit as exc:  # --help and --version
        code = exc.code if isinstance(exc.code, int) else 0
    except OSError as exc:  # the system refused something no check foresaw (permissions, a full disk, EIO)
        code = _report_error(errors.from_os_error(exc), argv)
    except Exception as exc:
        raw = _not_utf8(argv)
        if isinstance(exc, UnicodeEncodeError) and raw is not None:  # a raw name where vault takes only text
            code = _report_error(raw, argv)
        elif type(exc).__module__ != "sqlite3":
            code = _bug(exc, argv)
        else:  # by its kind: locked (retry), full, refused, or really damaged
            code = _report_error(errors.from_sqlite(exc, path=_catalog_named(argv)), argv)
    finally:
        for sig, handler in previous.items():
            _signal.signal(sig, handler)
        ui.restore_output(streams)
    return code


def _not_utf8(argv: list[str]) -> errors.UsageError | None:
    """The error for the first argument that is not UTF-8 (bytes the shell passed raw), if one is not."""
    from cloudvault.cli.ui import printable

    raw = next((arg for arg in argv if printable(arg) != arg), None)
    if raw is None:
        return None
    why = "is not UTF-8, and this command takes text there: give it in UTF-8"
    return errors.UsageError(detail=f"the argument '{printable(raw)}' {why}")


def _catalog_named(argv: list[str]) -> str:
    from cloudvault import config

    given = argv[argv.index("--catalog") + 1] if "--catalog" in argv[:-1] else None
    return config.catalog_path(given)


def _report_error(error: errors.VaultError, argv: list[str]) -> int:
    _report(error.message, error.exit_code, argv)
    return error.exit_code


def _report(message: str, code: int, argv: list[str]) -> None:
    """One line on stderr; with --json also a JSON object on stdout, so a script always gets a document."""
    from cloudvault.cli.ui import printable

    message = printable(errors.one_line(message))  # a name that is not UTF-8 shown as \\xNN, as everywhere
    sys.stderr.write(f"vault: error: {message}\n")
    if "--json" in argv:
        import json

        sys.stdout.write(json.dumps({"error": message, "exit_code": code}) + "\n")


def _bug(exc: Exception, argv: list[str]) -> int:
    """An exception no check foresaw is a bug in vault: its traceback, then one line, exit 70 (never 1, which
    means "nothing found", nor a user error's code)."""
    import traceback

    traceback.print_exception(exc, file=sys.stderr)
    _report(f"a bug in vault ({type(exc).__name__}: {exc}); the traceback is above: please report it",
            errors.BUG, argv)  # fmt: skip
    return errors.BUG


_COMMAND = {"ended": False}  # whether main's command has its outcome (a signal then lands while it is reported)


def _interrupt(signum, frame) -> None:
    if not _COMMAND["ended"]:
        raise errors.Interrupted()


def _stop(signum, frame) -> None:
    """SIGTERM and SIGHUP are handled as Ctrl-C is: children stopped, the run recorded interrupted (143, 129).
    A second one (a batch system repeats it) does not cut that stopping short; SIGKILL still does."""
    _signal.signal(signum, _signal.SIG_IGN)
    if not _COMMAND["ended"]:
        raise errors.Signalled(signum)


def console_main() -> None:
    code = main()
    # The process ends here. The full collections the interpreter runs at exit would traverse every object left
    # (about 7 ms, a sixth of a small `vault extract`); each command has closed what it opened, and memory goes
    # back to the system with the process, so the objects are frozen out of those collections.
    gc.freeze()
    if _nothing_left_at_exit():
        os._exit(code)  # as mypy ends: freeing every module's objects one by one was ~1 ms of a small extract
    sys.exit(code)


def _threads_left() -> bool:
    """Whether a thread other than this one is alive, or one of threading's exit hooks is registered (threading
    imported is not enough: a site's .pth may import it at start-up without starting anything)."""
    threading = sys.modules.get("threading")
    if threading is None:
        return False
    return threading.active_count() > 1 or bool(getattr(threading, "_threading_atexits", True))


def _nothing_left_at_exit() -> bool:
    """Whether the interpreter's teardown would only free memory: no exit handler registered (tempfile's, logging's,
    a pool's), no thread but this one alive, and the output flushed. Otherwise it runs as usual."""
    import atexit

    count = getattr(atexit, "_ncallbacks", None)
    if count is None or count() or _threads_left():
        return False
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a reader that left, a closed stream: the usual exit says so as it always has
        return False
    return True
