"""`vault log` and `vault diff`: the index generations kept, and what changed between two of them, as `restic diff`
shows it between snapshots: files and archive members added, removed and modified, and what a run found changed in
place or damaged (the recorded version kept).

A version of a path is known by the generation that recorded it, so two generations holding the same version of
a file (or archive) need no member compared; an archive in two versions is compared member by member.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from cloudvault.catalog import generations
from cloudvault.catalog.generations import Held
from cloudvault.errors import GenerationNotFound


@dataclass(frozen=True, slots=True)
class GenerationDiff:
    """What changed from generation before to generation after: the typed result of `vault diff`, and its --json."""

    before: int | None  # None: compared with nothing (the first generation)
    after: int
    added: tuple[str, ...]
    removed: tuple[str, ...]
    modified: tuple[str, ...]
    changed_in_place: tuple[str, ...]
    damaged: tuple[str, ...]

    def to_json(self) -> dict:
        return {"from": self.before, "to": self.after, "added": list(self.added), "removed": list(self.removed),
                "modified": list(self.modified), "changed_in_place": list(self.changed_in_place),
                "damaged": list(self.damaged)}  # fmt: skip


@dataclass
class _Changes:
    """The paths found changed so far; frozen into a GenerationDiff at the end."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    changed_in_place: list[str] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class IndexLog:
    """Every index generation, oldest first: the typed result of `vault log`, and its --json."""

    generations: tuple[generations.Generation, ...]

    def to_json(self) -> dict:
        return {"generations": [g.to_json() for g in self.generations]}


def index_log(conn: sqlite3.Connection) -> IndexLog:
    """`vault log`: the generations the catalog keeps."""
    return IndexLog(tuple(generations.all_generations(conn)))


def diff_generations(conn: sqlite3.Connection, first: int | None, second: int | None) -> GenerationDiff:
    """`vault diff`: none given, the last two generations; one, it and the latest; both, those two."""
    return generation_diff(conn, *pick_generations(conn, first, second))


def pick_generations(conn: sqlite3.Connection, first: int | None, second: int | None) -> tuple[int | None, int]:
    """(before, after): both given; one given: it and the latest; none: the last two."""
    known = generations.generation_numbers(conn)
    for number in (first, second):
        if number is not None and number not in known:
            raise GenerationNotFound(number=number, last=known[-1] if known else "none")
    if not known:
        raise GenerationNotFound(number="any", last="none")
    if first is not None:
        return first, second if second is not None else known[-1]
    return (known[-2] if len(known) > 1 else None), known[-1]


def generation_diff(conn: sqlite3.Connection, before: int | None, after: int) -> GenerationDiff:
    """Every file and member that differs between what generation before held and what after held."""
    diff = _Changes()
    old_state = generations.held(conn, before) if before is not None else {}
    new_state = generations.held(conn, after)
    names = generations.mirror_names(conn)
    several = len({mirror for mirror, _ in old_state.keys() | new_state.keys()}) > 1

    def label(mirror_id: int, path: str) -> str:
        return f"{names.get(mirror_id, mirror_id)}:{path}" if several else path

    for key in sorted(old_state.keys() | new_state.keys(), key=lambda k: (k[1], k[0])):
        old, new = old_state.get(key), new_state.get(key)
        name = label(*key)
        if old is None:
            diff.added += [name, *_members(conn, new, name)]
        elif new is None:
            diff.removed += [name, *_members(conn, old, name)]
        elif old.generation != new.generation and (old.kind, old.blake3) != (new.kind, new.blake3):
            diff.modified.append(name)
            if old.archive and new.archive:
                _member_changes(conn, old, new, name, diff)
    low = before if before is not None else -1
    for mirror_id, path, kind in generations.events_between(conn, low, after):
        if (mirror_id, path) in new_state:
            target = diff.changed_in_place if kind == "changed_in_place" else diff.damaged
            if label(mirror_id, path) not in target:
                target.append(label(mirror_id, path))
    return GenerationDiff(before, after, tuple(diff.added), tuple(diff.removed), tuple(diff.modified),
                          tuple(diff.changed_in_place), tuple(diff.damaged))  # fmt: skip


def _members(conn: sqlite3.Connection, version: Held, name: str) -> list[str]:
    return [f"{name}/{path}" for path in generations.members_held(conn, version)] if version.archive else []


def _member_changes(conn: sqlite3.Connection, old: Held, new: Held, name: str, diff: _Changes) -> None:
    before, after = generations.members_held(conn, old), generations.members_held(conn, new)
    for path in sorted(before.keys() | after.keys()):
        if path not in before:
            diff.added.append(f"{name}/{path}")
        elif path not in after:
            diff.removed.append(f"{name}/{path}")
        elif before[path] != after[path]:
            diff.modified.append(f"{name}/{path}")
