"""Small frozen records passed between the layers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Frame:
    """One zstd frame: where it sits in the compressed file and which decompressed bytes it holds."""

    comp_offset: int
    comp_size: int
    raw_offset: int
    raw_size: int


@dataclass(frozen=True)
class FileStat:
    """What a walk of the mirror sees of one path; (size, mtime, inode, ctime) decide a re-index."""

    path: str
    raw_path: bytes | None
    kind: str  # file | symlink
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    mode: int
    link_target: str | None = None

    @property
    def signature(self) -> tuple[int, int, int, int]:
        return (self.size, self.mtime_ns, self.inode, self.ctime_ns)


@dataclass(frozen=True)
class Flag:
    """Something worth a warning: damage, an unsafe path, a secret (never its value)."""

    kind: str
    detail: str
    member: str | None = None


@dataclass(frozen=True)
class Member:
    """One tar member as the catalog records it."""

    path: str
    raw_path: bytes | None
    type: str
    size: int
    mode: int
    mtime: int
    uid: int
    gid: int
    uname: str
    gname: str
    link_target: str | None
    header_offset: int
    data_offset: int
    blake3: str | None


@dataclass(frozen=True)
class Entry:
    """One top-level directory of a mirror, with its manifest metadata."""

    mirror: str
    entry_id: str
    what: str
    node_gpu: str
    measured: str
    size_text: str
    key_files: tuple[str, ...]
    caution: str
    settings_json: str
