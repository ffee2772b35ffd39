"""What an archive file is, from its first bytes and its name: the one place vault decides which files it opens.

The content decides (a `.tgz` that is really zstd is read as zstd); the name only says which files are worth
opening to look (`might_be_archive`) and what a file whose bytes say nothing (a damaged or empty one) was meant
to be. A compressed file whose name does not say tar (`x.json.gz`) is an archive only if it decompresses to a
tar header.
"""

from __future__ import annotations

HEAD = 64 << 10  # the bytes a caller reads from the start of a file for archive_format

OPENED = ("tar.zst", "tar", "tar.gz", "tar.bz2", "tar.xz", "zip")  # formats whose members vault indexes
NOT_OPENED = ("rar", "7z", "multi-volume")  # archives vault recognises, counts and names, but does not open
BOMB_RATIO = 1000  # declared (or decoded) bytes per byte of an archive past which it is a bomb (deflate tops at 1032)
BOMB_FLOOR = 1 << 30  # an archive declaring (or decoding to) less than this is never refused

GZIP, BZIP2, XZ = b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00"
ZSTD, ZSTD_SKIPPABLE = b"\x28\xb5\x2f\xfd", 0x184D2A50
ZIP_HEADS = (b"PK\x03\x04", b"PK\x05\x06")  # a first member's local record; an empty zip's end record
RAR, SEVEN_ZIP = (b"Rar!\x1a\x07\x00", b"Rar!\x1a\x07\x01\x00"), b"7z\xbc\xaf\x27\x1c"

# the name's ending -> the format it names; longest first so `.tar.gz` wins over `.gz`
TAR_NAMES = (
    (".tar.zst", "tar.zst"), (".tar.zstd", "tar.zst"), (".tzst", "tar.zst"), (".tzs", "tar.zst"),
    (".tar.gz", "tar.gz"), (".tgz", "tar.gz"), (".taz", "tar.gz"),
    (".tar.bz2", "tar.bz2"), (".tbz2", "tar.bz2"), (".tbz", "tar.bz2"), (".tb2", "tar.bz2"),
    (".tar.xz", "tar.xz"), (".txz", "tar.xz"),
    (".tar", "tar"),
)  # fmt: skip
ZIP_NAMES = (".zip", ".whl", ".jar", ".conda")  # read through their central directory (archive/zip.py)
COMPRESSED_NAMES = (".gz", ".bz2", ".xz", ".zst", ".zstd")  # maybe a tar inside: looked at, kept if it is
OTHER_NAMES = (".rar", ".7z")
MULTI_VOLUME_NAMES = (".7z.001", ".zip.001", ".z01", ".r00", ".part1.rar", ".tar.gz.aa", ".tar.aa")


ARCHIVE_NAMES = tuple(n for n, _ in TAR_NAMES) + ZIP_NAMES + COMPRESSED_NAMES + OTHER_NAMES + MULTI_VOLUME_NAMES


def might_be_archive(name: str) -> bool:
    """Whether a file's name makes it worth reading its first bytes (the others are plain files, unopened): asked
    of every archive member too (nested_format), so it makes no tuple per call."""
    return name.lower().endswith(ARCHIVE_NAMES)


NESTED = ("tar.zst", "tar", "tar.gz", "tar.bz2", "tar.xz")  # what an archive member can be, read once more (one level)


def nested_format(head: bytes, name: str) -> str | None:
    """The format of an archive member that is itself a tar archive, read once more as one: its name makes it worth
    the look (as a mirror file's does), its first bytes alone decide (a compressed one must decompress to a tar
    header); None for any other member."""
    if not might_be_archive(name):
        return None
    fmt = archive_format(head, "")
    return fmt if fmt in NESTED else None


def through_archive(query: str) -> tuple[str | None, str]:
    """(the archive's file name, the path inside it) of a path through an archive (`data/x.tgz/src/a.txt`,
    `data/x.zip/a.txt`); (None, query) when it goes through none."""
    lower = query.lower()
    suffixes = [suffix for suffix, _ in TAR_NAMES] + list(ZIP_NAMES)
    cuts = [lower.find(suffix + "/") + len(suffix) for suffix in suffixes if suffix + "/" in lower]
    if not cuts:
        return None, query
    cut = min(cuts)
    return query[:cut].rsplit("/", 1)[-1], query[cut + 1 :]


def archive_format(head: bytes, name: str) -> str | None:
    """The archive format of a file from its first bytes (up to HEAD of them) and its name: one of OPENED, one of
    NOT_OPENED, or None (not an archive: a plain file)."""
    lower = name.lower()
    named = next((fmt for suffix, fmt in TAR_NAMES if lower.endswith(suffix)), None)
    if lower.endswith(MULTI_VOLUME_NAMES):
        return "multi-volume"
    if head.startswith(RAR):
        return "multi-volume" if _rar_volume(head) else "rar"
    if head.startswith(SEVEN_ZIP):
        return "7z"
    if head.startswith(ZIP_HEADS) or (lower.endswith(ZIP_NAMES) and not _compression(head)):
        return "zip"  # by its name too: a zip may begin with a stub (self-extracting), its directory is at the end
    compressed = _compression(head)
    if compressed is not None:
        if named is not None or _is_tar(_decompressed_head(compressed, head)):
            return f"tar.{compressed}"
        return None
    if _is_tar(head):
        return "tar"
    return named  # bytes that say nothing (damaged, empty, cut short): the name says what it was meant to be


def _compression(head: bytes) -> str | None:
    if head.startswith(GZIP):
        return "gz"
    if head.startswith(BZIP2) and head[3:4] in b"123456789" and len(head) > 3:
        return "bz2"
    if head.startswith(XZ):
        return "xz"
    if head.startswith(ZSTD) or (len(head) >= 4 and int.from_bytes(head[:4], "little") & ~0xF == ZSTD_SKIPPABLE):
        return "zst"
    return None


def _decompressed_head(compressed: str, head: bytes) -> bytes:
    """The first decompressed bytes the head holds (empty when it holds none that decode)."""
    try:  # each decoder imported here, for the format it reads: `vault extract` imports this module for through_archive
        if compressed == "gz":
            import zlib

            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 1024)
        if compressed == "bz2":
            import bz2

            return bz2.BZ2Decompressor().decompress(head, 1024)
        if compressed == "xz":
            import lzma

            return lzma.LZMADecompressor().decompress(head, 1024)
        import io

        import zstandard  # only for a `.zst` not named as a tar

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(head)) as reader:
            return reader.read(1024)  # no more: 64 KiB of zstd can hold gigabytes of zeros
    except Exception:  # bytes that do not decode: the scan names the damage when it reads them
        return b""


def _is_tar(block: bytes) -> bool:
    """A ustar/GNU magic, or an old (v7) header whose checksum is right."""
    if len(block) < 512:
        return False
    if block[257:262] == b"ustar":
        return True
    try:
        recorded = int(block[148:156].strip(b" \x00") or b"-1", 8)
    except ValueError:
        return False
    return recorded == sum(block[:148]) + 256 + sum(block[156:512]) and any(block[:100])


def _rar_volume(head: bytes) -> bool:
    """A RAR4 archive's main header says whether it is one volume of several (flag 0x0001)."""
    if head.startswith(RAR[0]) and len(head) >= 12 and head[9] == 0x73:
        return bool(int.from_bytes(head[10:12], "little") & 0x0001)
    return False
