"""Entry point of `vault`: errors become one line and an exit code; search and extract skip Typer."""

from __future__ import annotations

import os
import signal
import sys

from cloudvault import errors


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    previous = signal.signal(signal.SIGINT, _interrupt)
    try:
        fast = _fast_path(argv)
        code = fast() if fast else _run_app(argv)
    except errors.VaultError as exc:
        sys.stderr.write(f"vault: error: {exc.message}\n")
        code = exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("vault: error: interrupted; the catalog keeps everything committed before\n")
        code = errors.INTERRUPTED
    except BrokenPipeError:  # `vault ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    finally:
        signal.signal(signal.SIGINT, previous)
    return code


def _fast_path(argv: list[str]):
    """`vault [--catalog P] search|extract ...` without importing Typer and rich (see cli/fast.py)."""
    from cloudvault.cli.fast import fast_runner

    return fast_runner(argv)


def _run_app(argv: list[str]) -> int:
    """Typer in standalone mode prints usage errors (exit 2) itself; VaultError passes through to main."""
    from cloudvault.cli.app import app

    try:
        app(args=argv, prog_name="vault")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


def _interrupt(signum, frame) -> None:
    raise errors.Interrupted()


def console_main() -> None:
    sys.exit(main())
