"""What one mirror's indexing steps share: the catalog, the mirror, its rules, the report and the progress."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from cloudvault.archive.seekable import private_folder
from cloudvault.archive.zip import unread_method
from cloudvault.catalog.copies import copy_recorded
from cloudvault.config import seekable_dir
from cloudvault.index.definition import MirrorDefinition
from cloudvault.index.secrets import SecretRules
from cloudvault.index.walk import entry_of
from cloudvault.models import FileStat, Flag
from cloudvault.progress import Progress
from cloudvault.tools.mirrorfs import LocalMirror

# flag kinds that make `vault index` exit 5: something in the mirror is damaged or could not be read whole
DAMAGE = {
    "not_zstd",
    "corrupt_frame",
    "truncated",
    "bad_crc",
    "corrupt_stream",
    "not_tar",
    "corrupt_header",
    "unreadable",
    "changed_while_indexing",
    "list_mismatch",
    "unsafe_member",
    "walk_error",
    "changed_in_place",
    "damaged_frame",
    "damaged_member",
    "bad_size",  # this one and those below (and bad_crc): a zip's (archive/zip.py)
    "corrupt_data",
    "not_zip",
    "zip_bomb",
    "nested_bomb",  # an archive member that is an archive decoding past the zip bomb limits (archive/nested.py)
    "zip_header_mismatch",
    "zip_no_local_header",
    "zip_overlap",
}


@dataclass
class IndexReport:
    mirrors: list[str] = field(default_factory=list)
    files_seen: int = 0
    files_read: int = 0
    files_unchanged: int = 0
    files_deleted: int = 0
    added: int = 0
    modified: int = 0
    changed_in_place: int = 0  # same size and mtime, other bytes: the recorded hash kept as the reference
    newly_damaged: int = 0  # archives intact as recorded, damaged now: their recorded members kept
    archives_read: int = 0
    members_indexed: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    flags: dict[str, int] = field(default_factory=dict)
    generation: int | None = None  # the run's number (`vault log`)
    still_flagged: int = 0  # files an earlier run found changed in place or damaged, not read again by this one
    dropped: list[str] = field(default_factory=list)  # --prune: mirrors whose root is gone, removed from the catalog
    empty: list[str] = field(default_factory=list)  # mirrors whose root holds no file at all (a mistake?)
    not_opened: dict[str, int] = field(default_factory=dict)  # archives in formats vault does not open: .rar -> n
    missing_extras: list[str] = field(default_factory=list)  # one line each: what to install for random access
    encrypted_members: dict[str, int] = field(default_factory=dict)  # zip (partly encrypted) -> its encrypted members
    unread_methods: dict[str, int] = field(default_factory=dict)  # zip members by the method vault does not read
    one_block_xz: list[str] = field(default_factory=list)  # xz archives of one block: no seek point inside them

    @property
    def damaged(self) -> bool:
        return self.still_flagged > 0 or any(kind in DAMAGE for kind in self.flags)

    def generation_counts(self) -> dict[str, int]:
        """What `vault log` keeps of the run."""
        return {"seen": self.files_seen, "read": self.files_read, "added": self.added, "modified": self.modified,
                "removed": self.files_deleted, "changed_in_place": self.changed_in_place,
                "newly_damaged": self.newly_damaged}  # fmt: skip

    def count_limits(self, path: str, flags: list[Flag]) -> None:
        """What of an archive vault does not read, or reads slowly, for the summary: a zip's members flagged
        encrypted_member or unsupported_method; an xz archive of one block."""
        encrypted = sum(1 for f in flags if f.kind == "encrypted_member")
        if encrypted:
            self.encrypted_members[path] = encrypted
        if any(f.kind == "xz_one_block" for f in flags):
            self.one_block_xz.append(path)
        for f in flags:
            if f.kind == "unsupported_method":
                method = unread_method(f.detail)
                self.unread_methods[method] = self.unread_methods.get(method, 0) + 1

    def count(self, flags: list[Flag] | dict[str, int]) -> None:
        items = flags.items() if isinstance(flags, dict) else ((f.kind, 1) for f in flags)
        for kind, n in items:
            self.flags[kind] = self.flags.get(kind, 0) + n


@dataclass(frozen=True)
class IndexOptions:
    """How `vault index` runs: the cores to read archives on (None: every core present, as memory allows; see
    index/budget.py), a cache to write seekable copies into in the same pass, and whether a root that lost most
    of its files may be pruned."""

    workers: int | None = None
    copy_cache: Path | None = None
    prune: bool = False
    accept: tuple[str, ...] = ()  # paths changed in place whose new bytes are taken as a new version
    generation: int | None = None  # the generation the run adds to (a Slurm merge begins it); None: a new one


@dataclass
class MirrorContext:
    conn: sqlite3.Connection
    mirror_id: int | None  # None until a new mirror's row is written
    mirror: LocalMirror  # or FsspecMirror: the same methods
    definition: MirrorDefinition
    rules: SecretRules
    report: IndexReport
    progress: Progress
    copy_cache: Path | None = None  # vault index --optimize: seekable copies go here
    generation: int = 0  # the index run's number (catalog.generations)
    accepted: frozenset[str] = frozenset()  # paths whose new bytes are a new version even when changed in place
    secret_named: set[str] = field(default_factory=set)  # paths stored redacted: their real name is not known here

    def entry_for(self, path: str) -> str:
        entry = entry_of(path)
        return entry if self.definition.is_entry(entry) else ""

    def changed_since_walk(self, st: FileStat) -> bool:
        """The file's size or mtime now differ from the walk's: it changed while vault read it."""
        return self.mirror.stat(st.path, st.raw_path) != (st.size, st.mtime_ns)

    def remove_unrecorded(self, copies: list[str]) -> None:
        """Seekable copies whose rows were just replaced or deleted: vault wrote them and nothing names them now."""
        for path in copies:
            if not copy_recorded(self.conn, path):
                Path(path).unlink(missing_ok=True)

    def copy_tmp(self, i: int) -> str | None:
        if self.copy_cache is None:
            return None
        folder = seekable_dir(self.copy_cache)
        private_folder(folder)
        return str(folder / f".indexing-{os.getpid()}-{i}.tmp")
