"""Re-hash what the catalog recorded: whole entries, or a random sample across the mirror (bit-rot check)."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import blake3

from cloudvault.archive.reader import ArchiveReader
from cloudvault.archive.zstdframes import ZstdFormatError
from cloudvault.catalog.query import entry_filter
from cloudvault.errors import IntegrityError
from cloudvault.index.archive import scan_archive
from cloudvault.members import archive_source
from cloudvault.mirrorfs import open_mirror


@dataclass(frozen=True)
class Mismatch:
    path: str
    archive: str | None
    expected: str | None
    found: str | None
    why: str


@dataclass
class VerifyReport:
    checked_files: int = 0
    checked_members: int = 0
    bytes_hashed: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def to_json(self) -> dict:
        return {**{k: v for k, v in asdict(self).items() if k != "mismatches"}, "ok": self.ok,
                "mismatches": [asdict(m) for m in self.mismatches]}  # fmt: skip


def _files(conn: sqlite3.Connection, scope: tuple[int, str] | None) -> list[tuple]:
    sql = (
        "SELECT f.id, m.root, f.path, f.raw_path, f.size, f.mtime_ns, f.blake3, a.id FROM files f "
        "JOIN mirrors m ON m.id = f.mirror_id LEFT JOIN archives a ON a.file_id = f.id "
        "WHERE f.kind = 'file' AND f.blake3 IS NOT NULL"
    )
    where, args = entry_filter("f", scope)
    return conn.execute(sql + where + " ORDER BY f.path", args).fetchall()


def _check_file(report: VerifyReport, root: str, path: str, raw: bytes | None, size: int, expected: str) -> bool:
    report.checked_files += 1
    try:
        found = open_mirror(root).hash(path, raw)
    except FileNotFoundError:
        report.mismatches.append(Mismatch(path, None, expected, None, "missing"))
        return False
    except OSError as exc:
        report.mismatches.append(Mismatch(path, None, expected, None, f"unreadable: {exc.strerror}"))
        return False
    report.bytes_hashed += size
    if found != expected:
        report.mismatches.append(Mismatch(path, None, expected, found, "content changed"))
        return False
    return True


def _check_archive_members(
    conn: sqlite3.Connection, report: VerifyReport, archive_id: int, root: str, path: str, raw: bytes | None
) -> None:
    """One pass over the archive: every member's BLAKE3 against the catalog, by data offset."""
    shard = sqlite3.connect(":memory:")
    shard.execute("CREATE TABLE members (path, raw_path, type, size, mode, mtime, uid, gid, uname, gname, "
                  "link_target, header_offset, data_offset, blake3)")  # fmt: skip
    with open_mirror(root).open(path, raw) as fh:
        scan = scan_archive(fh, shard, None)
    found = {off: digest for off, digest in shard.execute("SELECT data_offset, blake3 FROM members")}
    for member, offset, expected in conn.execute(
        "SELECT path, data_offset, blake3 FROM members WHERE archive_id = ? AND blake3 IS NOT NULL AND type = 'file'",
        (archive_id,),
    ):
        report.checked_members += 1
        if found.get(offset) != expected:
            why = "member damaged" if offset in found else f"member unreadable ({scan.status})"
            report.mismatches.append(Mismatch(member, path, expected, found.get(offset), why))


def verify_entries(
    conn: sqlite3.Connection, scope: tuple[int, str] | None, on_file: Callable[[str], None] | None = None
) -> VerifyReport:
    """Every plain file and archive of the scope re-hashed; a damaged archive's members are checked one by one."""
    report = VerifyReport()
    for _fid, root, path, raw, size, _mtime, expected, archive_id in _files(conn, scope):
        if on_file:
            on_file(path)
        if _check_file(report, root, path, raw, size, expected) or archive_id is None:
            if archive_id is not None:  # the archive is intact, so are its members
                report.checked_members += conn.execute(
                    "SELECT count(*) FROM members WHERE archive_id = ? AND type = 'file'", (archive_id,)
                ).fetchone()[0]
            continue
        if open_mirror(root).stat(path, raw) is not None:
            _check_archive_members(conn, report, archive_id, root, path, raw)
    return report


def verify_sample(conn: sqlite3.Connection, fraction: float, seed: int | None = None) -> VerifyReport:
    """A random fraction of plain files and of archive members across every mirror, members read by seeking."""
    rng = random.Random(seed)
    report = VerifyReport()
    for _fid, root, path, raw, size, _mtime, expected, archive_id in _files(conn, None):
        if archive_id is None and rng.random() < fraction:
            _check_file(report, root, path, raw, size, expected)
    members = conn.execute(
        "SELECT mb.path, mb.data_offset, mb.size, mb.blake3, f.path, f.id FROM members mb "
        "JOIN archives a ON a.id = mb.archive_id JOIN files f ON f.id = a.file_id "
        "WHERE mb.type = 'file' AND mb.blake3 IS NOT NULL AND a.status = 'ok' ORDER BY f.path, mb.data_offset"
    ).fetchall()
    picked = [m for m in members if rng.random() < fraction]
    readers: dict[int, ArchiveReader | None] = {}
    try:
        for member, offset, size, expected, archive, file_id in picked:
            report.checked_members += 1
            if file_id not in readers:
                readers[file_id] = _open_reader(conn, file_id, report)
            reader = readers[file_id]
            if reader is None:
                report.mismatches.append(Mismatch(member, archive, expected, None, "archive missing or changed"))
                continue
            h = blake3.blake3()
            try:
                for chunk in reader.chunks(offset, size):
                    h.update(chunk)
            except (IntegrityError, ZstdFormatError) as exc:
                report.mismatches.append(Mismatch(member, archive, expected, None, str(exc)))
                continue
            report.bytes_hashed += size
            if h.hexdigest() != expected:
                report.mismatches.append(Mismatch(member, archive, expected, h.hexdigest(), "member damaged"))
    finally:
        for reader in readers.values():
            if reader:
                reader.close()
    return report


def _open_reader(conn: sqlite3.Connection, file_id: int, report: VerifyReport) -> ArchiveReader | None:
    try:
        source, frames = archive_source(conn, file_id)
    except (OSError, IntegrityError):
        return None
    return ArchiveReader(source, frames)
