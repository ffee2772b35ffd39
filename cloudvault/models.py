"""Small immutable records passed between the layers.

They are records (cloudvault/record.py: namedtuples made without compiling code) rather than dataclasses: `vault
extract` and `vault search` must start in a few tens of milliseconds, and building dataclasses at import costs
several.
"""

from __future__ import annotations

from cloudvault.record import record


class Hole(bytes):
    """Zeros of a sparse member's hole (archive/sparse.py): a writer that can seek leaves them out of the file (a
    real hole on disk). Here, beside the records, so that a reader of chunks tells one apart without loading the
    sparse maps' reader."""

    __slots__ = ()


class Frame(record("Frame", "comp_offset comp_size raw_offset raw_size")):
    """One zstd frame: where it sits in the compressed file and which decompressed bytes it holds."""

    __slots__ = ()


class NestedArchive(record("NestedArchive", "raw_offset raw_size format status member_path member_offset")):
    """An archive member read once more as a tar archive (archive/nested.py): its decoded bytes sit at raw_offset in
    the outer archive's raw space (past the outer's own), raw_size of them, in format; status is its scan's outcome;
    member_path and member_offset name the outer member (its data offset) whose verified bytes it is."""

    __slots__ = ()


class FileStat(
    record("FileStat", "path raw_path kind size mtime_ns ctime_ns inode mode link_target", defaults=(None,))
):
    """What a walk of the mirror sees of one path (kind: file | symlink); the signature decides a re-index."""

    __slots__ = ()

    @property
    def signature(self) -> tuple[int, int, int, int]:
        return (self.size, self.mtime_ns, self.inode, self.ctime_ns)


class Flag(record("Flag", "kind detail member", defaults=(None,))):
    """Something worth a warning: damage, an unsafe path, a secret (never its value)."""

    __slots__ = ()


class Member(
    record(
        "Member",
        "mirror_id entry_id path raw_path type size mode mtime blake3 link_target archive file_id data_offset "
        "raw_link_target sparse_map",
        defaults=(None, None),
    )
):
    """One thing the catalog can hand back as bytes: a member of an archive, or a plain file of the mirror.

    path: the member path (or the plain file's path within its entry); archive: the archive's mirror path, None
    for a plain file; file_id: the files row that holds the bytes (the archive, or the plain file itself);
    blake3: of the data (None when the catalog has none: the data cannot be verified); raw_link_target: the link's
    bytes when link_target's text would lose them; sparse_map: a sparse member's pieces (JSON), its data expanded.
    """

    __slots__ = ()

    @property
    def label(self) -> str:
        return f"{self.archive.rsplit('/', 1)[-1]} :: {self.path}" if self.archive else self.path


class Entry(record("Entry", "mirror entry_id what node_gpu measured size_text key_files caution settings_json")):
    """One top-level directory of a mirror, with its manifest metadata."""

    __slots__ = ()
