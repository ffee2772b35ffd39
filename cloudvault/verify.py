"""Re-hash what the catalog recorded: whole entries, or a random sample across the mirror (bit-rot check).

The catalog itself is checked first (SQLite's integrity check). A whole-entry check re-hashes every file; an
archive whose hash changed is scanned again and its members compared with the catalog's by offset, and members
the scan could not reach (it stops at the first damaged frame) are read one by one through the frame table, so
exactly the members whose bytes are damaged are named. A sample reads members through `MemberReader`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from cloudvault.catalog import query  # query.resolve_entry looked up at the call
from cloudvault.catalog.db import catalog_file
from cloudvault.catalog.integrity import (
    Flagged,
    HashedFile,
    all_hashed_members,
    flagged_objects,
    hashed_files,
    hashed_member_count,
    hashed_members,
    integrity_problem,
    unhashed_files,
    unhashed_member_count,
)
from cloudvault.catalog.lookup import archive_format
from cloudvault.errors import CatalogDamaged, ChangedSinceRecorded, IntegrityError
from cloudvault.io.members import MemberReader
from cloudvault.models import Member
from cloudvault.record import record
from cloudvault.tools.mirrorfs import open_mirror

# (start-up: `vault verify 013` loads no dataclasses, no hashlib (OpenSSL) or random, which serve --sample, and no
# archive scanner, which serves an archive that changed: ~7 ms of imports, a third of its budget)


Mismatch = record("Mismatch", "path archive expected found why")  # archive: None for a plain file


class VerifyReport(record("VerifyReport", "checked_files checked_members bytes_hashed unchecked unchecked_examples "
                                          "mismatches flagged")):  # fmt: skip
    """What a check found: the typed result of `vault verify`, and its --json. unchecked: files and members the
    catalog holds no hash for (nothing to compare with); flagged: changed in place or damaged as `vault index`
    found them."""

    __slots__ = ()

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.unchecked and not self.flagged

    def to_json(self) -> dict:
        return {"checked_files": self.checked_files, "checked_members": self.checked_members,
                "bytes_hashed": self.bytes_hashed, "unchecked": self.unchecked,
                "unchecked_examples": list(self.unchecked_examples), "ok": self.ok,
                "mismatches": [m._asdict() for m in self.mismatches],
                "flagged": [f._asdict() for f in self.flagged]}  # fmt: skip


class _Tally:
    """The counts and findings of a check as it goes; frozen into a VerifyReport at its end."""

    def __init__(self, flagged: list[Flagged] | None = None) -> None:
        self.checked_files = self.checked_members = self.bytes_hashed = self.unchecked = 0
        self.unchecked_examples: list[str] = []
        self.mismatches: list[Mismatch] = []
        self.flagged: list[Flagged] = flagged or []

    def report(self) -> VerifyReport:
        return VerifyReport(self.checked_files, self.checked_members, self.bytes_hashed, self.unchecked,
                            tuple(self.unchecked_examples), tuple(self.mismatches), tuple(self.flagged))  # fmt: skip


def verify(conn: sqlite3.Connection, entry: str | None = None, sample: float | None = None,
           seed: int | None = None) -> VerifyReport:  # fmt: skip
    """`vault verify`: a seeded sample across the mirror, or every file of one entry (or of all of them)."""
    if sample is not None:
        return verify_sample(conn, sample, seed)
    return verify_entries(conn, query.resolve_entry(conn, entry)[:2] if entry else None)


def check_catalog(conn: sqlite3.Connection) -> None:
    """CatalogDamaged when SQLite finds the catalog file itself damaged."""
    problem = integrity_problem(conn)
    if problem:
        raise CatalogDamaged(path=catalog_file(conn), detail=f"it fails SQLite's integrity check: {problem}")


def _count_unchecked(conn: sqlite3.Connection, report: _Tally, scope: tuple[int, str] | None) -> None:
    never = unhashed_files(conn, scope)
    report.unchecked = len(never) + unhashed_member_count(conn, scope)
    report.unchecked_examples = never[:5]


def _check_file(report: _Tally, f: HashedFile) -> bool:
    report.checked_files += 1
    try:
        found = open_mirror(f.root).hash(f.path, f.raw_path)
    except FileNotFoundError:
        report.mismatches.append(Mismatch(f.path, None, f.blake3, None, "missing"))
        return False
    except OSError as exc:
        report.mismatches.append(Mismatch(f.path, None, f.blake3, None, f"unreadable: {exc.strerror}"))
        return False
    report.bytes_hashed += f.size
    if found != f.blake3:
        report.mismatches.append(Mismatch(f.path, None, f.blake3, found, "content changed"))
        return False
    return True


def _check_archive_members(conn: sqlite3.Connection, report: _Tally, f: HashedFile) -> None:
    """Scan the changed archive; compare its member records by data offset; read the members past the point
    where the scan stopped through the frame table."""
    from cloudvault.archive.scan import ArchiveScan

    with open_mirror(f.root).open(f.path, f.raw_path) as fh:
        scan = ArchiveScan(fh, fmt=archive_format(conn, f.file_id)[0])
        found = {rec.data_offset: rec.blake3 for rec in scan if rec.blake3 is not None}
    unreached = []
    for member in hashed_members(conn, f.archive_id):
        if member.data_offset not in found:
            unreached.append(member)
            continue
        report.checked_members += 1
        if found[member.data_offset] != member.blake3:
            report.mismatches.append(Mismatch(member.path, f.path, member.blake3, found[member.data_offset],
                                              "member damaged"))  # fmt: skip
    _read_members(conn, report, unreached)


def _as_check(exc: Exception) -> str:
    """The reader's words for an extract, less what only an extract can say: a check writes nothing."""
    return str(exc).replace("; nothing was written", "")


def _read_members(conn: sqlite3.Connection, report: _Tally, members: list[Member]) -> None:
    """Each member read and hashed through MemberReader (the mirror's archive, entered at the member's frame);
    a changed or unreadable archive is named for its members and the check goes on."""
    broken: dict[int, str] = {}  # file id -> why its archive cannot be read at all
    with MemberReader(conn, originals=True) as reader:
        for member in members:
            report.checked_members += 1
            if member.file_id in broken:
                report.mismatches.append(Mismatch(member.path, member.archive, member.blake3, None,
                                                  broken[member.file_id]))  # fmt: skip
                continue
            try:
                stream = reader.open(member)
            except ChangedSinceRecorded as exc:  # this member only: the index found it damaged
                report.mismatches.append(Mismatch(member.path, member.archive, member.blake3, None, exc.fields["why"]))
                continue
            except (IntegrityError, OSError) as exc:
                broken[member.file_id] = _as_check(exc)
                report.mismatches.append(Mismatch(member.path, member.archive, member.blake3, None, _as_check(exc)))
                continue
            try:
                for _ in stream:
                    pass
            except IntegrityError as exc:
                why = "member damaged" if stream.blake3 else _as_check(exc)
                report.mismatches.append(Mismatch(member.path, member.archive, member.blake3, stream.blake3, why))
                continue
            report.bytes_hashed += stream.size


def verify_entries(
    conn: sqlite3.Connection, scope: tuple[int, str] | None, on_file: Callable[[str], None] | None = None
) -> VerifyReport:
    """Every plain file and archive of the scope re-hashed; a damaged archive's members are checked one by one."""
    check_catalog(conn)
    report = _Tally(flagged=flagged_objects(conn, scope))
    _count_unchecked(conn, report, scope)
    for f in hashed_files(conn, scope):
        if on_file:
            on_file(f.path)
        intact = _check_file(report, f)
        if f.archive_id is None:
            continue
        if intact:  # the archive is as indexed, so are its members
            report.checked_members += hashed_member_count(conn, f.archive_id)
        elif open_mirror(f.root).stat(f.path, f.raw_path) is not None:
            _check_archive_members(conn, report, f)
    return report.report()


def in_sample(seed: int, key: str, fraction: float) -> bool:
    """Whether the file or member named key (its path in the mirror) is in the seeded sample: a hash of the seed
    and the path, so a mirror's sample is the same whatever else the catalog holds and in whatever order."""
    import hashlib

    digest = hashlib.blake2b(key.encode("utf-8", "surrogateescape"), digest_size=8, key=str(seed).encode()[:64])
    return int.from_bytes(digest.digest(), "big") < fraction * 2**64


def verify_sample(conn: sqlite3.Connection, fraction: float, seed: int | None = None) -> VerifyReport:
    """A seeded fraction of plain files and of archive members across every mirror, members read by seeking."""
    import random

    check_catalog(conn)
    seed = random.SystemRandom().getrandbits(63) if seed is None else seed
    report = _Tally()
    _count_unchecked(conn, report, None)
    for f in hashed_files(conn, None):
        if f.archive_id is None and in_sample(seed, f.path, fraction):
            _check_file(report, f)
    picked = [m for m in all_hashed_members(conn) if in_sample(seed, f"{m.archive}\0{m.path}", fraction)]
    _read_members(conn, report, picked)
    return report.report()
