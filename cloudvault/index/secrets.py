"""Find credential-looking lines in text, and redact them, without ever keeping the value."""

from __future__ import annotations

import re
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


@dataclass(frozen=True)
class SecretHit:
    rule: str
    line: int

    def describe(self) -> str:
        return f"{self.rule} at line {self.line} (value not stored)"


def compile_rules(rules: dict[str, str]) -> re.Pattern[bytes]:
    return re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in rules.items()).encode())


def leading_literal(regex: str) -> bytes | None:
    """The plain characters a rule's regex must start with (3 or more), for a fast pre-check; None if unsure."""
    out = []
    for ch in regex:
        if ch in "\\.^$*+?{}[]|()":
            break
        out.append(ch)
    if out and regex[len(out) : len(out) + 1] in ("*", "?", "{"):
        out.pop()  # the last character is optional or repeated
    text = "".join(out)
    return text.encode() if len(text) >= 3 else None


def prefilter(pattern: re.Pattern[bytes]) -> tuple[bytes, ...] | None:
    """Literals one of which any match must contain; None when some rule has none (then always run the regex)."""
    literals = []
    for alternative in re.findall(r"\(\?P<\w+>(.*?)\)(?=\||$)", pattern.pattern.decode()):
        literal = leading_literal(alternative)
        if literal is None:
            return None
        literals.append(literal)
    return tuple(literals) or None


@dataclass
class SecretScanner:
    """Fed a stream chunk by chunk; remembers which rule matched on which line, nothing more."""

    pattern: re.Pattern[bytes]
    hits: list[SecretHit] = field(default_factory=list)
    literals: tuple[bytes, ...] | None = None  # see prefilter(); bytes.find runs at memory speed, re does not
    _tail: bytes = b""
    _line: int = 1  # line number at the start of _tail
    _seen: set = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.literals is None:
            self.literals = _PREFILTERS.setdefault(self.pattern.pattern, prefilter(self.pattern)) or ()

    def feed(self, chunk: bytes) -> None:
        data = self._tail + chunk if self._tail else chunk
        if not self.literals or any(lit in data for lit in self.literals):
            self._search(data)
        keep = data[-OVERLAP:] if len(data) > OVERLAP else data
        self._line += data.count(b"\n", 0, len(data) - len(keep))
        self._tail = keep

    def _search(self, data: bytes) -> None:
        for m in self.pattern.finditer(data):
            line = self._line + data.count(b"\n", 0, m.start())
            key = (m.lastgroup, line)
            if key not in self._seen and len(self.hits) < MAX_HITS:
                self._seen.add(key)
                self.hits.append(SecretHit(m.lastgroup, line))


_PREFILTERS: dict[bytes, tuple[bytes, ...] | None] = {}


def redact(text: str, pattern: re.Pattern[bytes]) -> str:
    """The text with every secret-looking match replaced, for storing docs in the catalog."""
    text_pattern = re.compile(pattern.pattern.decode())
    return text_pattern.sub(lambda m: f"[redacted {m.lastgroup}]", text)
