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

    def present(self, result, show, *args, **kw) -> None:
        """A command's typed result: its to_json() under --json, else show(self, result, ...), its view."""
        if self.as_json:
            self.emit(result.to_json())
        else:
            show(self, result, *args, **kw)

    def progress(self, label: str = "indexing"):
        """A rich progress bar on a terminal; silent otherwise or with --quiet."""
        from cloudvault.progress import Progress

        if self.quiet or self.as_json or not sys.stderr.isatty():
            return Progress()
        from cloudvault.cli.progress import RichProgress

        return RichProgress(label)


class ReaderLeft(BrokenPipeError):
    """The reader of bytes vault pipes out (`vault extract ... -o - | head -c 10`) has gone: the command stops."""


class Output:
    """A command's stdout or stderr. Once the reader of the pipe has gone (`vault restore env ... | head -3`), text
    written to it is dropped and the work goes on to its end, so the exit code is the work's, never a 0 for work
    cut short. Bytes written to .buffer (extract to stdout) are the work itself: they stop it (ReaderLeft)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.reader_left = False

    def write(self, text: str) -> int:
        if not self.reader_left:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.reader_left:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._drop()

    @property
    def buffer(self):
        return _Bytes(self, self.stream.buffer)

    def _drop(self) -> None:
        """What is written from now on (and what the stream still holds) goes to /dev/null: a child started later
        inherits that too, and the interpreter's last flush at exit finds nothing to complain of."""
        self.reader_left = True
        import os

        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # not a file (a test's capture): the flag alone drops it
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


class _Bytes:
    """stdout's byte stream: a reader that left stops the command (ReaderLeft), what is still buffered dropped."""

    def __init__(self, output: Output, raw) -> None:
        self.output, self.raw = output, raw

    def write(self, data) -> int:
        try:
            return self.raw.write(data)
        except BrokenPipeError:
            self.output._drop()
            raise ReaderLeft() from None

    def flush(self) -> None:
        try:
            self.raw.flush()
        except BrokenPipeError:
            self.output._drop()
            raise ReaderLeft() from None

    def __getattr__(self, name: str):
        return getattr(self.raw, name)


def guard_output() -> tuple:
    """sys.stdout and sys.stderr as Outputs for one command; give the pair returned to restore_output after it."""
    previous = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Output(sys.stdout), Output(sys.stderr)
    return previous


def restore_output(previous: tuple) -> None:
    """The command's output flushed (a reader that left: dropped), then the streams it had before."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    sys.stdout, sys.stderr = previous


def error(message: str) -> None:
    sys.stderr.write(f"vault: error: {message}\n")
