"""A grep pattern compiled once: Hyperscan where it can express it, Python's `re` where it cannot.

Both answer one question over a buffer of whole lines: where does the first match at or after pos end. Hyperscan
stops at the first match it reports (matches come in order of where they end), so a line that matches is found
without Python touching the lines before it.
"""

from __future__ import annotations

import re

from cloudvault import errors


class Pattern:
    """The pattern as grep's options shape it (-F literal, -i caseless, -w whole words)."""

    def __init__(self, text: str, *, fixed: bool = False, ignore_case: bool = False, word: bool = False) -> None:
        source = text.encode("utf-8", "surrogateescape")
        if fixed:
            source = b"".join(b"\\x%02x" % byte for byte in source)  # every byte literal, in both engines
        if word:
            source = rb"\b(?:" + source + rb")\b"
        self.source = source
        self.ignore_case = ignore_case
        self._db = self._hyperscan(source, ignore_case)
        self._regex = None if self._db is not None else _regex(source, ignore_case)
        self.engine = "hyperscan" if self._db is not None else "re"
        self._end = -1

    @staticmethod
    def _hyperscan(source: bytes, ignore_case: bool):
        try:
            import hyperscan
        except ImportError:
            return None
        flags = hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_ALLOWEMPTY
        if ignore_case:
            flags |= hyperscan.HS_FLAG_CASELESS
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        try:
            db.compile(expressions=[source], ids=[0], elements=1, flags=[flags])
        except hyperscan.error:
            return None  # back-references, look-arounds ...: `re` has them
        return db

    def _stop(self, _id, _start, end, _flags, _ctx) -> bool:
        self._end = end
        return True

    def first_end(self, data, pos: int = 0) -> int:
        """Where the first match that starts at or after pos ends, as an offset into data; -1 if none."""
        if self._db is None:
            found = self._regex.search(data, pos)
            return -1 if found is None else found.end()
        self._end = -1
        view = memoryview(data)[pos:] if pos else data
        try:
            self._db.scan(view, match_event_handler=self._stop)
        except Exception as exc:  # hyperscan.ScanTerminated: the first match stopped the scan
            if type(exc).__name__ != "ScanTerminated":
                raise
        return -1 if self._end < 0 else pos + self._end

    def matches(self, line) -> bool:
        """Whether the line (no newline) holds a match of its own."""
        return self.first_end(line) >= 0

    def spans(self, line: bytes) -> list[tuple[int, int]]:
        """Where the matches in a printed line are, for colouring (empty where `re` cannot read the pattern)."""
        try:
            regex = self._regex or _regex(self.source, self.ignore_case)
        except errors.UsageError:
            return []
        return [m.span() for m in regex.finditer(line) if m.end() > m.start()]


def _regex(source: bytes, ignore_case: bool) -> re.Pattern[bytes]:
    try:
        return re.compile(source, re.MULTILINE | (re.IGNORECASE if ignore_case else 0))
    except re.error as exc:
        raise errors.UsageError(detail=f"bad pattern {source.decode('utf-8', 'replace')!r}: {exc}") from None
