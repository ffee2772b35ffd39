"""`vault grep` output, written as the files and members are searched: lines as ENTRY:PATH[::MEMBER]:LINE:text
(coloured on a terminal), or the one `{"matches": [...]}` document (--json), each Found's objects as they come."""

from __future__ import annotations

import json
import sys

COLOURS = {"path": "\033[35m", "line": "\033[32m", "match": "\033[1;31m", "sep": "\033[36m", "off": "\033[0m"}


def failed(failure) -> None:
    """A file, member or archive that could not be searched: one line on stderr."""
    sys.stderr.write(f"vault: {failure.label}: {failure.message}\n")


class Lines:
    """Each Found as grep prints it: its lines (context lines with '-', breaks as '--'), or with -l its label,
    with -c its label and count."""

    def __init__(self, options, *, files_only: bool, count: bool, color: str) -> None:
        self.options, self.files_only, self.count = options, files_only, count
        self.colour = color == "always" or (color == "auto" and sys.stdout.isatty())
        self.pattern = None

    def found(self, result) -> None:
        out = sys.stdout.buffer
        out.write(self._text(result))
        out.flush()

    def end(self) -> None:
        pass

    def _text(self, result) -> bytes:
        label = result.label.encode("utf-8", "surrogateescape")
        if self.colour:
            label = COLOURS["path"].encode() + label + COLOURS["off"].encode()
        if self.files_only:
            return label + b"\n"
        if self.count:
            return label + b":%d\n" % result.count
        out = []
        for hit in result.hits:
            if hit.kind == "--":
                out.append((COLOURS["sep"] + "--" + COLOURS["off"] + "\n").encode() if self.colour else b"--\n")
                continue
            number, text = str(hit.line).encode(), hit.text
            if self.colour:
                number = COLOURS["line"].encode() + number + COLOURS["off"].encode()
                if hit.kind == ":" and not self.options.shape.invert:
                    text = self._painted(text)
            sep = hit.kind.encode()
            out.append(label + sep + number + sep + text + b"\n")
        return b"".join(out)

    def _painted(self, text: bytes) -> bytes:
        if self.pattern is None:
            from cloudvault.grep.pattern import Pattern

            o = self.options
            self.pattern = Pattern(o.pattern, fixed=o.fixed, ignore_case=o.ignore_case, word=o.word)
        spans = self.pattern.spans(text)
        if not spans:
            return text
        out, at = [], 0
        on, off = COLOURS["match"].encode(), COLOURS["off"].encode()
        for start, end in spans:
            out += [text[at:start], on, text[start:end], off]
            at = end
        return b"".join([*out, text[at:]])


class JsonLines:
    """The one `{"matches": [...]}` document, begun at once and written as results come: one object a line, a
    comma after each but the last (a script can read it as it comes)."""

    def __init__(self, counted: bool) -> None:
        self.counted, self.wrote = counted, False
        sys.stdout.buffer.write(b'{"matches": [')

    def found(self, result) -> None:
        docs = result.to_json(self.counted)
        if not docs:
            return
        text = ",\n".join(json.dumps(doc, ensure_ascii=False) for doc in docs)
        out = sys.stdout.buffer
        out.write((b",\n" if self.wrote else b"\n") + text.encode())
        out.flush()
        self.wrote = True

    def end(self) -> None:
        sys.stdout.buffer.write(b"\n]}\n" if self.wrote else b"]}\n")
