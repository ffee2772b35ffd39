"""Find credential-looking lines in text, and redact them, without ever keeping the value."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_RULES = {
    "hf_token_assignment": r"HF_TOKEN\s*[=:]\s*\S+",
    "hf_token": r"hf_[A-Za-z0-9]{30,}",
    "docker_auths": r'"auths"\s*:\s*\{',
    "aws_access_key": r"AKIA[0-9A-Z]{16}",
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
}
OVERLAP = 512  # a match split across two chunks is still seen
MAX_HITS = 20
TEXT_SNIFF = 8192
MAX_SCANNED = 256 << 20


# Dumps, weights, arrays and compressed data: never scanned, even when their first bytes hold no NUL (a dump of
# random bytes can look like text), so scanning costs little on archives that are mostly dumps.
DATA_SUFFIXES = (
    b".bin", b".pt", b".pth", b".ckpt", b".npy", b".npz", b".safetensors", b".gguf", b".onnx", b".h5", b".arrow",
    b".parquet", b".pkl", b".so", b".o", b".a", b".gz", b".zst", b".xz", b".bz2", b".zip", b".tar", b".whl", b".pyc",
    b".png", b".jpg", b".jpeg", b".gif", b".pdf", b".mp4",
)  # fmt: skip


def worth_scanning(name: bytes, size: int, first: bytes) -> bool:
    """Text of any name (`train.log.1`, `env.bak`, `run.stdout` hold tokens as often as `.log` does), judged by
    its first bytes holding no NUL; known data formats are passed over by their suffix."""
    if name.lower().endswith(DATA_SUFFIXES):
        return False
    return size <= MAX_SCANNED and b"\0" not in first[:TEXT_SNIFF]


def top_level_branches(regex: str) -> list[str]:
    """The alternatives of a regex split at its top-level `|` (not inside a group, a class or after a `\\`)."""
    branches, start, depth, in_class, i = [], 0, 0, False, 0
    while i < len(regex):
        ch = regex[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            branches.append(regex[start:i])
            start = i + 1
        i += 1
    return [*branches, regex[start:]]


def leading_literal(regex: str) -> bytes | None:
    """The plain characters a regex (one branch) must start with (3 or more), for a fast pre-check; None if unsure."""
    out = []
    for ch in regex:
        if ch in "\\.^$*+?{}[]|()":
            break
        out.append(ch)
    if out and regex[len(out) : len(out) + 1] in ("*", "?", "{"):
        out.pop()  # the last character is optional or repeated
    text = "".join(out)
    return text.encode() if len(text) >= 3 else None


def prefilter(rules: dict[str, str]) -> tuple[bytes, ...] | None:
    """Literals one of which any match must contain (one per top-level branch of every rule); None when some
    branch has none (then the regex always runs)."""
    literals = []
    for regex in rules.values():
        for branch in top_level_branches(regex):
            literal = leading_literal(branch)
            if literal is None:
                return None
            literals.append(literal)
    return tuple(literals) or None


@dataclass(frozen=True)
class SecretRules:
    """A mirror definition's secret rules, compiled once: one pattern whose group names are the rule names."""

    rules: dict[str, str]
    pattern: re.Pattern[bytes] = field(init=False, compare=False)
    literals: tuple[bytes, ...] = field(init=False, compare=False)  # bytes.find runs at memory speed, re does not
    search: LiteralSearch = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        joined = "|".join(f"(?P<{name}>{rx})" for name, rx in self.rules.items())
        object.__setattr__(self, "pattern", re.compile(joined.encode()))
        object.__setattr__(self, "literals", prefilter(self.rules) or ())
        object.__setattr__(self, "search", LiteralSearch(self.literals))

    def scanner(self, name: bytes, size: int, first: bytes) -> SecretScanner | None:
        """A scanner for a file or member (the archive scan's Inspect hook), if it is worth scanning."""
        return SecretScanner(self, left=size) if self.rules and worth_scanning(name, size, first) else None

    def may_match(self, data: bytes) -> bool:
        """Whether data may hold a match: False only when it holds none of the rules' literals (one pass for all
        of them, see LiteralSearch); the archive scan checks many small members' bytes together with it."""
        return bool(self.rules) and (not self.literals or self.search(data))

    def redact(self, text: str) -> str:
        """The text with every secret-looking match replaced, for storing docs, names and details."""
        if not self.rules:
            return text
        text_pattern = re.compile(self.pattern.pattern.decode())
        return text_pattern.sub(lambda m: f"[redacted {m.lastgroup}]", text)

    def redact_bytes(self, data: bytes) -> bytes:
        if not self.rules:
            return data
        return self.pattern.sub(lambda m: f"[redacted {m.lastgroup}]".encode(), data)

    def found_in(self, text: str) -> list[str]:
        """The rules that match text (a name, a listing line): what to flag, never the value."""
        if not self.rules:
            return []
        data = text.encode("utf-8", "surrogateescape")
        if self.literals and not contains_any(data, self.literals):  # names: one per member
            return []
        return sorted({m.lastgroup for m in self.pattern.finditer(data)})


@dataclass(frozen=True)
class SecretHit:
    rule: str
    line: int

    def describe(self) -> str:
        return f"{self.rule} at line {self.line} (value not stored)"


def _c_memmem() -> Callable[[bytes, bytes], bool] | None:
    """libc's memmem through ctypes, which lets go of the GIL while it searches (bytes.find holds it), so the
    decoding thread keeps running while a chunk is scanned; None where libc has no memmem."""
    try:
        import ctypes

        memmem = ctypes.CDLL(None).memmem
    except (OSError, AttributeError):
        return None
    memmem.restype = ctypes.c_void_p
    memmem.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
    return lambda data, literal: memmem(data, len(data), literal, len(literal)) is not None


_memmem: list = []  # looked up on first use: `vault extract` never pays for importing ctypes


def contains_any(data: bytes, literals: tuple[bytes, ...]) -> bool:
    """Whether data holds one of the literals (each searched at memory speed, without the GIL where it can)."""
    if not _memmem:
        _memmem.append(_c_memmem())
    find = _memmem[0]
    if find is None or len(data) < 4096:  # a foreign call costs more than a small search
        return any(literal in data for literal in literals)
    return any(find(data, literal) for literal in literals)


class LiteralSearch:
    """Whether bytes hold any of a set of literals. Hyperscan (a dependency on x86-64 Linux, where its wheels
    exist) finds them all in one pass at several GB/s without the GIL, about six times faster than the search per
    literal that is used elsewhere (libc's memmem, or bytes.find for small data). Built on first use."""

    def __init__(self, literals: tuple[bytes, ...], engine: str = "auto") -> None:
        self.literals = literals
        self.engine = engine  # auto | hyperscan | memmem
        self._db = None
        self._terminated: type[Exception] = Exception

    def _compile(self) -> None:
        if self.engine != "memmem":
            try:
                import hyperscan
            except ImportError:
                if self.engine == "hyperscan":
                    raise
                self.engine = "memmem"
                return
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            n = len(self.literals)
            db.compile(expressions=list(self.literals), ids=list(range(n)), elements=n,
                       flags=[hyperscan.HS_FLAG_SINGLEMATCH] * n)  # fmt: skip
            self._db, self._terminated, self.engine = db, hyperscan.ScanTerminated, "hyperscan"

    def __call__(self, data: bytes) -> bool:
        if self.engine == "auto" or (self.engine == "hyperscan" and self._db is None):
            self._compile()
        if self._db is None or len(data) < 4096:  # a foreign call costs more than a small search
            return contains_any(data, self.literals)
        try:
            self._db.scan(data, match_event_handler=_stop_at_first)
        except self._terminated:
            return True
        return False


def _stop_at_first(*_match) -> bool:
    return True  # ends the scan: one match is all the pre-check needs


@dataclass
class SecretScanner:
    """Fed a stream chunk by chunk; remembers which rule matched on which line, nothing more.

    Each chunk is searched where it lies (no joining): a pre-check for the rules' literals, then the one pattern of
    all rules only where a literal is. A match across two chunks is found in a small window (the previous chunk's
    last OVERLAP bytes and this one's first OVERLAP bytes). A hit's line is counted from the chunk's first line.
    """

    rules: SecretRules
    hits: list[SecretHit] = field(default_factory=list)
    left: int | None = None  # bytes still to come, when known: nothing is carried past the last chunk
    _tail: bytes = b""  # the last OVERLAP bytes of the previous chunk
    _line: int = 1  # line number at the start of the next chunk
    _seen: set = field(default_factory=set)

    def feed(self, chunk: bytes) -> None:
        start = 0  # where the chunk's own search begins: after a match that crossed into it
        literals = self.rules.literals
        if self._tail:
            window = self._tail + chunk[:OVERLAP]
            if not literals or self.rules.search(window):
                start = self._search(window, self._line - self._tail.count(b"\n"), len(self._tail)) - len(self._tail)
        if not literals or self.rules.search(chunk):
            self._search(chunk, self._line, len(chunk), max(start, 0))
        if self.left is not None:
            self.left -= len(chunk)
            if self.left <= 0:  # the last chunk: its lines matter only up to a hit, counted there
                return
        self._line += chunk.count(b"\n")
        self._tail = chunk[-OVERLAP:] if len(chunk) > OVERLAP else (self._tail + chunk)[-OVERLAP:]

    def _search(self, data: bytes, line: int, starts_before: int, pos: int = 0) -> int:
        """Record the matches in data that start before starts_before (line: data's first line); return where
        the last such match ended."""
        end, counted, at = 0, 0, line
        for m in self.rules.pattern.finditer(data, pos):
            if m.start() >= starts_before:
                break
            at += data.count(b"\n", counted, m.start())  # lines counted only up to a hit, and only once
            counted, end = m.start(), m.end()
            key = (m.lastgroup, at)
            if key not in self._seen and len(self.hits) < MAX_HITS:
                self._seen.add(key)
                self.hits.append(SecretHit(m.lastgroup, at))
        return end

    def findings(self) -> list[tuple[str, str]]:
        """(flag kind, detail) for each hit: the rule and line, never the value."""
        return [("secret", hit.describe()) for hit in self.hits]
