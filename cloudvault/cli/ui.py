"""The one place that decides how output looks: --json, --quiet, colours, progress bars, errors."""

from __future__ import annotations

import sys


def human_size(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def printable(text: str) -> str:
    """Text safe for any terminal or pipe: names that are not valid UTF-8 shown as \\xNN escapes."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class UI:
    """Plain text on stdout (ANSI bold only on a terminal), one JSON document with --json, errors on stderr."""

    def __init__(self, *, as_json: bool = False, quiet: bool = False) -> None:
        self.as_json = as_json
        self.quiet = quiet
        self.tty = sys.stdout.isatty()

    def line(self, text: str = "") -> None:
        if not self.as_json:
            sys.stdout.write(printable(text) + "\n")

    def heading(self, text: str) -> None:
        self.line(f"\033[1m{text}\033[0m" if self.tty else text)

    def warn(self, text: str) -> None:
        if not self.quiet:
            sys.stderr.write(f"vault: {text}\n")

    def emit(self, document: object) -> None:
        import json

        sys.stdout.write(printable(json.dumps(document, ensure_ascii=False, indent=2, default=str)) + "\n")

    def progress(self, label: str = "indexing"):
        """A rich progress bar on a terminal; silent otherwise or with --quiet."""
        from cloudvault.progress import Progress

        if self.quiet or self.as_json or not sys.stderr.isatty():
            return Progress()
        from cloudvault.cli.progress import RichProgress

        return RichProgress(label)


def error(message: str) -> None:
    sys.stderr.write(f"vault: error: {message}\n")
