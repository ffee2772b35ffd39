"""The matching lines of one decoded stream (a plain file or an archive member), fed chunk by chunk.

A chunk is cut after its last newline; the part line after it is carried into the next chunk (up to LINE_MAX,
past which a line is searched in pieces), so a line that spans two chunks is searched whole and state stays small
whatever the member. Context lines (-A/-B/-C) carry across chunks the same way. Lines are redacted (secret rules)
as they are kept, so a secret's value never leaves this object.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import NamedTuple

from cloudvault.grep.pattern import Pattern

LINE_MAX = 16 << 20
HOLD_MAX = 16 << 20  # lines held (until the stream verifies) beyond this many bytes go to an unnamed temp file
BINARY_SNIFF = 8192  # as the index and ripgrep judge it: a NUL in the first bytes means binary


class Hit(NamedTuple):
    """A line to show: kind ':' a matching line, '-' a context line, '--' a break between groups (no line)."""

    kind: str
    line: int
    offset: int
    text: bytes


class Shape(NamedTuple):
    """What grep's options ask of each stream: which lines, how many, with how much context."""

    invert: bool = False
    max_count: int = 0  # 0: no limit
    before: int = 0
    after: int = 0
    keep_lines: bool = True  # False for -c, -l, -q: lines are counted, never kept
    first_only: bool = False  # -l, -q: the first matching line settles it
    binary: bool = False


class LineSearch:
    """Feed chunks, then finish(); hits (lines to show) and count (selected lines) are the result."""

    def __init__(self, pattern: Pattern, shape: Shape, redact: Callable[[bytes], bytes]) -> None:
        self.pattern, self.shape, self.redact = pattern, shape, redact
        self.hits: list[Hit] = []
        self._held = 0  # bytes of text in hits
        self._spill = None  # a temp file of pickled batches of hits, once hits outgrew HOLD_MAX
        self.count = 0
        self.binary = False
        self.done = False  # nothing more to find (-m reached, binary, -l's first match): the rest need not be fed
        self._carry = b""
        self._line = 1  # number of the line the next buffer starts with
        self._offset = 0  # byte offset in the stream of the next buffer's first byte
        self._started = False
        self._before: deque[Hit] | tuple = deque(maxlen=shape.before) if shape.before else ()
        self._after_left = 0
        self._last_shown = 0  # number of the last line shown (0: none yet)

    def feed(self, chunk: bytes) -> None:
        if self.done:
            return
        if not self._started:
            self._started = True
            if not self.shape.binary and b"\0" in chunk[:BINARY_SNIFF]:
                self.binary = self.done = True
                return
        buf = self._carry + chunk if self._carry else chunk
        cut = buf.rfind(b"\n") + 1
        if cut == 0 and len(buf) < LINE_MAX:
            self._carry = buf
            return
        cut = cut or len(buf)  # a line longer than LINE_MAX: searched in pieces
        self._carry = buf[cut:]
        self._search(buf, cut)

    def finish(self) -> None:
        if self._carry and not self.done:
            buf, self._carry = self._carry, b""
            self._search(buf, len(buf))

    def _search(self, buf: bytes, end: int) -> None:
        """Every line of buf[:end] (whole lines) checked; matching lines are found by the pattern, not by Python
        walking the lines, unless -v or context asks for the others."""
        pos, line = 0, self._line
        while pos < end and not self.done:
            found = self.pattern.first_end(buf, pos)
            if found < 0 or found > end:
                break
            last = max(found - 1, pos)  # the match's last byte
            start = buf.rfind(b"\n", pos, last) + 1 or pos
            stop = buf.find(b"\n", last, end)
            stop = end if stop < 0 else stop
            if self.pattern.matches(memoryview(buf)[start:stop]):
                line = self._others(buf, pos, start, line)
                self._one(buf, start, stop, line, matched=True)
                line += 1
            else:  # a match across lines ended here; the line alone holds none
                line = self._others(buf, pos, min(stop + 1, end), line)
            pos = stop + 1
        if pos < end and not self.done:
            line = self._others(buf, pos, end, line)
        self._line = line
        self._offset += end

    def _others(self, buf: bytes, pos: int, stop: int, line: int) -> int:
        """The lines of buf[pos:stop], none of which matches (the first numbered line); the next line's number.
        Python walks them only for -v and context."""
        if not (self.shape.invert or self._after_left or self.shape.before) or pos >= stop:
            if not self.shape.keep_lines:
                return line  # -c, -l, -q: no line is shown, so none needs its number
            return line + buf.count(b"\n", pos, stop) + (stop > pos and buf[stop - 1 : stop] != b"\n")
        if not self.shape.invert and not self._after_left:  # only the last `before` lines can be context
            keep, at = self.shape.before, stop
            while keep and at > pos:
                at = buf.rfind(b"\n", pos, at - 1) + 1 or pos
                keep -= 1
            line, pos = line + buf.count(b"\n", pos, at), at
        at = pos
        while at < stop and not self.done:
            nl = buf.find(b"\n", at, stop)
            nl = stop if nl < 0 else nl
            self._one(buf, at, nl, line, matched=False)
            at, line = nl + 1, line + 1
        return line + buf.count(b"\n", at, stop) + (stop > at and buf[stop - 1 : stop] != b"\n")

    def _one(self, buf: bytes, start: int, stop: int, line: int, matched: bool) -> None:
        full = bool(self.shape.max_count) and self.count >= self.shape.max_count  # -m: the rest is context
        if matched != self.shape.invert and not full:
            self._selected(buf, start, stop, line)
        elif self.shape.keep_lines:
            self._context(buf, start, stop, line)

    def _selected(self, buf: bytes, start: int, stop: int, line: int) -> None:
        self.count += 1
        if self.shape.first_only:
            self.done = True
            return
        if self.shape.keep_lines:
            for hit in self._before:
                if self._last_shown < hit.line < line:
                    self._show(hit._replace(text=self.redact(hit.text)))
            if self._before:
                self._before.clear()
            self._show(Hit(":", line, self._offset + start, self.redact(buf[start:stop])))
            self._after_left = self.shape.after
        self.done = bool(self.shape.max_count) and self.count >= self.shape.max_count and not self._after_left

    def _context(self, buf: bytes, start: int, stop: int, line: int) -> None:
        """A line not selected: shown as after-context if one is due, else kept as possible before-context."""
        if self._after_left:
            self._after_left -= 1
            self._show(Hit("-", line, self._offset + start, self.redact(buf[start:stop])))
            self.done = bool(self.shape.max_count) and self.count >= self.shape.max_count and not self._after_left
        elif self.shape.before:
            self._before.append(Hit("-", line, self._offset + start, buf[start:stop]))

    def _show(self, hit: Hit) -> None:
        if self._last_shown and hit.line > self._last_shown + 1 and (self.shape.before or self.shape.after):
            self.hits.append(Hit("--", 0, 0, b""))
        self.hits.append(hit)
        self._last_shown = hit.line
        self._held += len(hit.text) + 64
        if self._held > HOLD_MAX:
            self._spilled()

    def _spilled(self) -> None:
        """The held lines written out (already redacted), so a member whose every line matches stays small."""
        import pickle
        import tempfile

        if self._spill is None:
            self._spill = tempfile.TemporaryFile(prefix="vault-grep-")  # noqa: SIM115 (read back in batches())
        pickle.dump(self.hits, self._spill, protocol=pickle.HIGHEST_PROTOCOL)
        self.hits, self._held = [], 0

    def batches(self) -> Iterator[list[Hit]]:
        """The lines to show, in order, in batches (one when nothing was spilled)."""
        if self._spill is not None:
            import pickle

            self._spill.seek(0)
            with self._spill:
                while True:
                    try:
                        yield pickle.load(self._spill)
                    except EOFError:
                        break
            self._spill = None
        yield self.hits
