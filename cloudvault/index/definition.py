"""Mirror definitions (catalogs/*.toml) and manifests (manifests/*.toml): what a directory is."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from cloudvault.errors import MirrorDefinitionInvalid
from cloudvault.index.secrets import DEFAULT_RULES
from cloudvault.models import Entry


@dataclass(frozen=True)
class MirrorDefinition:
    """How to index one mirror: its name, roots, which directories are entries, which manifest, secret rules."""

    name: str
    roots: tuple[str, ...]
    manifest: str | None = None
    entry_pattern: str = r"^[^.].*$"
    secrets: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_RULES))

    def with_root(self, root: str) -> MirrorDefinition:
        return MirrorDefinition(self.name, (root,), self.manifest, self.entry_pattern, self.secrets)

    def is_entry(self, dirname: str) -> bool:
        return re.match(self.entry_pattern, dirname) is not None


def definition_from_toml(text: str, source: str = "<text>") -> MirrorDefinition:
    """The definition in text; a malformed one (user-given: catalogs/*.toml) is MirrorDefinitionInvalid naming
    source and what is wrong, never a KeyError."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MirrorDefinitionInvalid(path=source, detail=f"not valid TOML ({exc})") from None
    problem = _definition_problem(data)
    if problem:
        raise MirrorDefinitionInvalid(path=source, detail=problem)
    return MirrorDefinition(
        name=data["name"],
        roots=tuple(data.get("roots", ())),
        manifest=data.get("manifest"),
        entry_pattern=data.get("entry_pattern", r"^[^.].*$"),
        secrets=data.get("secrets", dict(DEFAULT_RULES)),
    )


def _definition_problem(data: dict) -> str | None:
    """What is wrong with a parsed definition's keys and types, or None."""
    if not isinstance(data.get("name"), str) or not data["name"]:
        return 'it needs name = "..." (a non-empty string)'
    if not isinstance(data.get("roots", []), list) or not all(isinstance(r, str) for r in data.get("roots", [])):
        return "roots must be a list of strings (paths or URLs)"
    if not isinstance(data.get("manifest", ""), str) or not isinstance(data.get("entry_pattern", ""), str):
        return "manifest and entry_pattern must be strings"
    secrets = data.get("secrets", {})
    if not isinstance(secrets, dict) or not all(isinstance(v, str) for v in secrets.values()):
        return "secrets must be a table of name = regular expression"
    for key, pattern in [("entry_pattern", data.get("entry_pattern", "")), *secrets.items()]:
        try:
            re.compile(pattern)
        except re.error as exc:
            return f"{key} is not a regular expression ({exc})"
    return None


def load_definition(path: Path) -> MirrorDefinition:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise MirrorDefinitionInvalid(path=path, detail="not UTF-8 text") from None
    return definition_from_toml(text, str(path))


def builtin_definition(name: str) -> MirrorDefinition:
    return definition_from_toml(resources.files("cloudvault.mirrors").joinpath(f"{name}.toml").read_text("utf-8"))


def load_manifest(name: str) -> dict[str, Entry]:
    """Manifest entries by directory name."""
    text = resources.files("cloudvault.manifests").joinpath(f"{name}.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    return {row["id"]: manifest_entry(data["name"], row) for row in data["entry"]}


def manifest_entry(mirror: str, row: dict) -> Entry:
    return Entry(
        mirror=mirror,
        entry_id=row["id"],
        what=row.get("what", ""),
        node_gpu=row.get("node_gpu", ""),
        measured=row.get("measured", ""),
        size_text=row.get("size", ""),
        key_files=tuple(row.get("key_files", ())),
        caution=row.get("caution", ""),
        settings_json=json.dumps(row.get("settings", {}), ensure_ascii=False, sort_keys=True),
    )


def manifest_table(name: str, filename: str) -> str:
    """A data file shipped beside a manifest (e.g. 014_per_request.csv)."""
    return resources.files("cloudvault.manifests").joinpath(name, filename).read_text(encoding="utf-8")


def guess_manifest(dirnames: list[str]) -> str | None:
    """A plain path gets the built-in manifest whose directory names it holds most of, if any."""
    best, score = None, 0
    for candidate in ("marvell_cloud",):
        names = set(load_manifest(candidate))
        hits = len(names.intersection(dirnames))
        if hits > score:
            best, score = candidate, hits
    return best if score >= 3 else None
