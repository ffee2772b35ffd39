"""Frozen results that are their own JSON documents: an operation's typed result for the command line, whose
to_json() is the one schema for `--json` and for what the catalog stores (docs/commands/ says its fields)."""

from __future__ import annotations

import dataclasses

SHOWN_ONLY = {"json": False}  # field(metadata=SHOWN_ONLY): for the terminal's view, not the document


class Document:
    """A frozen dataclass's to_json(): its fields, in order, as plain JSON values (tuples become lists, nested
    Documents their documents), less the fields marked SHOWN_ONLY."""

    def to_json(self) -> dict:
        fields = [f for f in dataclasses.fields(self) if f.metadata.get("json", True)]
        return {f.name: plain(getattr(self, f.name)) for f in fields}


def plain(value):
    """value as JSON values: a Document its document, tuples lists, dicts and lists looked into."""
    if isinstance(value, Document):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value
