"""The lab's `.tar.zst.list` files (`tar -t` or `tar -tv` output) compared with an archive's members."""

from __future__ import annotations

import re

VERBOSE = re.compile(rb"^[-dlhcbps][rwxsStT-]{9}\S*\s+\S+\s+\d+\s+\S+\s+\S+\s+(.*)$")


def normalize(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name.rstrip("/") or "."


def parse_listing(data: bytes) -> list[str]:
    """Paths named by a listing; `tar -tv` lines lose their mode/owner/size/date columns and any ' -> target'."""
    paths = []
    for line in data.splitlines():
        if not line.strip():
            continue
        m = VERBOSE.match(line)
        if m:
            line = m.group(1)
            if line.startswith(b"/") is False and (b" -> " in line or b" link to " in line):
                line = re.split(rb" -> | link to ", line, maxsplit=1)[0]
        paths.append(normalize(line.decode("utf-8", "backslashreplace")))
    return paths


def compare_listing(listed: list[str], members: list[str]) -> tuple[list[str], list[str]]:
    """(listed but not in the archive, in the archive but not listed), each sorted."""
    a, b = set(listed), {normalize(m) for m in members}
    return sorted(a - b), sorted(b - a)
