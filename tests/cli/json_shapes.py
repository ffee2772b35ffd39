"""A command's --json checked against the fields its docs/commands/ page documents: the page's `json fields`
blocks are the snapshot a real run's document must match (every field documented, of a documented type).

A block is a fenced ```text block whose first line is `json fields: NAME`; each further line is `PATH TYPE`:
PATH is a dotted path (`a[]` is each item of list a), TYPE one or more of str int float bool null list object
map absent joined by `|` (`map`: an object whose keys are data, not field names; it is not looked into; `absent`: a
top-level field some documents of the command leave out)."""

from __future__ import annotations

import re

from conftest import REPO

TYPES = {str: "str", int: "int", float: "float", bool: "bool", type(None): "null", list: "list", dict: "object"}


def documented(page: str, name: str) -> dict[str, set[str]]:
    """PATH -> its types, from the `json fields: NAME` block of docs/commands/PAGE."""
    text = (REPO / "docs" / "commands" / page).read_text()
    block = re.search(rf"```text\njson fields: {re.escape(name)}\n(.*?)```", text, re.S)
    assert block, f"docs/commands/{page} documents no `json fields: {name}` block"
    fields = {}
    for line in block.group(1).splitlines():
        if line.strip():
            path, types = line.split()
            fields[path] = set(types.split("|"))
    return fields


def shape(document, maps: set[str], path: str = "") -> dict[str, set[str]]:
    """PATH -> the types found there in a real document (lists' items merged)."""
    found: dict[str, set[str]] = {}
    kind = TYPES[type(document)]
    if path:
        found.setdefault(path, set()).add("map" if path in maps and kind == "object" else kind)
    if isinstance(document, dict) and path not in maps:
        for key, value in document.items():
            for p, t in shape(value, maps, f"{path}.{key}" if path else key).items():
                found.setdefault(p, set()).update(t)
    elif isinstance(document, list):
        for item in document:
            for p, t in shape(item, maps, f"{path}[]").items():
                found.setdefault(p, set()).update(t)
    return found


def check(document, page: str, name: str) -> None:
    """Every field of document documented with its type; every documented top-level field present."""
    fields = documented(page, name)
    maps = {p for p, t in fields.items() if "map" in t}
    real = shape(document, maps)
    undocumented = sorted(p for p in real if p not in fields)
    assert not undocumented, f"{page} `{name}`: fields not documented: {undocumented}"
    wrong = {p: sorted(t - fields[p] - ({"int"} if "float" in fields[p] else set())) for p, t in real.items()}
    wrong = {p: t for p, t in wrong.items() if t}
    assert not wrong, f"{page} `{name}`: types not documented: {wrong}"
    top = [p for p, t in fields.items() if "." not in p and "[]" not in p and "absent" not in t]
    missing = [p for p in top if p not in real] if isinstance(document, dict) else []
    assert not missing, f"{page} `{name}`: documented fields missing from a real run: {missing}"
