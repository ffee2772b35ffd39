"""A `.tar.zst` docker save archive as the body of a docker load, verified while it streams and cut off if not.

The archive is decompressed in a thread and handed to the daemon chunk by chunk, with no copy on disk. On the
way, the compressed bytes are hashed with sha256 (for SHA256SUMS), every member named by a digest is hashed
against its name, and every layer against the config's `rootfs.diff_ids`. Docker needs `manifest.json` (or
`index.json`) to load anything, and docker save writes them last: from the first of them on, the stream is held
back until every check has passed. A failed check raises inside the body, so the daemon sees a cut-off request
and loads nothing.
"""

from __future__ import annotations

import hashlib
import posixpath
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import zstandard

from cloudvault.archive.tar import TarFormatError, TarHeader, iter_members
from cloudvault.archive.zstdframes import ThreadedFrameStream, ZstdFormatError
from cloudvault.progress import Progress
from cloudvault.restore.docker.errors import ArchiveDamaged, ArchiveHashMismatch
from cloudvault.restore.docker.oci import (
    METADATA,
    ArchiveFormatError,
    ImageConfig,
    member_name,
    named_digest,
    parse_config,
    parse_index,
    parse_manifest,
    read_by_docker,
)

KEEP_SMALL = 8 << 20  # JSON members (configs, manifests) are kept to be parsed; layers only hashed
HOLD_LIMIT = 256 << 20  # held-back metadata beyond this means the archive is not laid out as docker save writes
COALESCE = 256 << 10  # small pieces (tar headers) go out joined, not as one HTTP chunk each


@dataclass(frozen=True)
class CheckedImage:
    """The image an archive proved to hold: its config, the tags docker load applies, the index's manifests."""

    config: ImageConfig
    repo_tags: tuple[str, ...]
    manifest_digests: tuple[str, ...]
    sha256: str  # of the compressed archive


class MemberDigest:
    """sha256 of a member's bytes, and of their gzip/zstd decompression when the member is a compressed layer."""

    def __init__(self) -> None:
        self.raw = hashlib.sha256()
        self.inner: hashlib._Hash | None = None
        self._decompress: Callable[[bytes], bytes] | None = None
        self._first = True

    def update(self, chunk: bytes) -> None:
        if self._first:
            self._first = False
            if chunk[:2] == b"\x1f\x8b":
                self._decompress = zlib.decompressobj(31).decompress
            elif chunk[:4] == b"\x28\xb5\x2f\xfd":
                self._decompress = zstandard.ZstdDecompressor().decompressobj().decompress
            if self._decompress:
                self.inner = hashlib.sha256()
        self.raw.update(chunk)
        if self._decompress and self.inner:
            try:
                self.inner.update(self._decompress(chunk))
            except (zlib.error, zstandard.ZstdError):
                self._decompress, self.inner = None, None  # not a compressed layer after all

    def digests(self) -> tuple[str, str]:
        """(digest of the bytes, digest of the uncompressed layer)."""
        raw = "sha256:" + self.raw.hexdigest()
        return raw, ("sha256:" + self.inner.hexdigest()) if self.inner else raw


class TarCheck:
    """What a docker save tar must prove as it passes: names against contents, then layers against diff_ids."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.digests: dict[str, tuple[str, str]] = {}
        self.kept: dict[str, bytes] = {}
        self.names: set[str] = set()
        self._kept_size = 0

    def admit(self, header: TarHeader) -> str:
        """The member's name, once it is one docker reads as vault does: never a second member of one name, a
        name that `..`, `.` or `//` would make another (`x/../manifest.json`), nor a link, folder or device where
        docker reads a file (manifest.json, index.json, repositories, a blob, a layer). docker save writes none
        of these; docker load would read the member vault did not check."""
        raw = header.name.decode("utf-8", "surrogateescape")
        name = member_name(raw)
        bare = name.rstrip("/")
        if bare and posixpath.normpath(bare) != bare:
            raise ArchiveDamaged(path=self.label, detail=f"member {raw!r} is not a normalised path")
        if bare in self.names:
            raise ArchiveDamaged(path=self.label, detail=f"member {bare} is a duplicate (docker reads the last one)")
        self.names.add(bare)
        if read_by_docker(bare) not in (None, header.type):
            raise ArchiveDamaged(path=self.label, detail=f"member {bare} is a {header.type}, not a regular file")
        return name

    def member(self, header: TarHeader, chunks: Iterator[bytes]) -> Iterator[bytes]:
        """Pass the member's data through, hashing it; a digest-named member must hash to its name."""
        name = member_name(header.name.decode("utf-8", "surrogateescape"))
        digest, parts = MemberDigest(), []
        keep = header.size <= KEEP_SMALL
        for chunk in chunks:
            digest.update(chunk)
            if keep and not parts and chunk[:1] not in (b"{", b"["):
                keep = False
            if keep:
                parts.append(chunk)
            yield chunk
        raw, inner = self.digests[name] = digest.digests()
        claimed = named_digest(name)
        if claimed is not None and claimed != raw:
            detail = f"member {name} hashes to {raw}, not the digest it is named by"
            raise ArchiveDamaged(path=self.label, detail=detail)
        if keep and parts:
            self._kept_size += header.size
            if self._kept_size > HOLD_LIMIT:
                raise ArchiveDamaged(path=self.label, detail="more JSON members than any docker save archive holds")
            self.kept[name] = b"".join(parts)

    def finish(self, sha256: str) -> CheckedImage:
        """manifest.json's one image: its config (digest from its bytes) and each layer against its diff_id."""
        try:
            items = parse_manifest(self._need("manifest.json"))
            if len(items) != 1:
                raise ArchiveFormatError(f"manifest.json names {len(items)} images; vault restores one per archive")
            item = items[0]
            config = parse_config(self._need(item.config), self.digests[item.config][0])
            if len(item.layers) != len(config.diff_ids):
                raise ArchiveFormatError(
                    f"manifest.json names {len(item.layers)} layers, the config {len(config.diff_ids)} diff_ids"
                )
            for index, (layer, diff_id) in enumerate(zip(item.layers, config.diff_ids, strict=True)):
                if layer not in self.digests:
                    raise ArchiveFormatError(f"layer {layer} named in manifest.json is not in the archive")
                if self.digests[layer][1] != diff_id:
                    raise ArchiveFormatError(
                        f"layer {index + 1} ({layer}) is {self.digests[layer][1]}, the config's diff_id is {diff_id}"
                    )
            index = parse_index(self.kept["index.json"]) if "index.json" in self.kept else []
        except ArchiveFormatError as exc:
            raise ArchiveDamaged(path=self.label, detail=str(exc)) from None
        return CheckedImage(config, item.repo_tags, tuple(index), sha256)

    def _need(self, name: str) -> bytes:
        if name not in self.kept:
            raise ArchiveFormatError(f"{name} is missing (or not JSON); this is not a docker save archive")
        return self.kept[name]


class TeeStream:
    """The decompressed stream as iter_members reads it; what was read waits in an outbox for the daemon."""

    def __init__(self, inner: ThreadedFrameStream) -> None:
        self.inner = inner
        self.pos = inner.pos
        self.hold = False
        self._out: list[bytes] = []
        self._out_size = 0

    def _keep(self, data: bytes) -> bytes:
        if data:
            self._out.append(data)
            self._out_size += len(data)
            self.pos += len(data)
        if self.hold and self._out_size > HOLD_LIMIT:
            raise ArchiveFormatError("manifest.json comes before the layers, unlike any docker save archive")
        return data

    def read(self, n: int) -> bytes:
        return self._keep(self.inner.read(n))

    def read_some(self, n: int) -> bytes:
        return self._keep(self.inner.read_some(n))

    def take(self, *, final: bool = False) -> Iterator[bytes]:
        """What may go to the daemon now: nothing while held, unless final (every check passed)."""
        if (self.hold and not final) or not self._out:
            return
        out, self._out, self._out_size = self._out, [], 0
        batch: list[bytes] = []
        for piece in out:
            if len(piece) >= COALESCE:
                if batch:
                    yield b"".join(batch)
                    batch = []
                yield piece
            else:
                batch.append(piece)
        if batch:
            yield b"".join(batch)


class VerifiedBody:
    """Iterate it as the body of `APIClient.load_image`; after a full pass, `image` is what the archive proved.

    gate, if given, sees the proven image before the held-back tail goes out, and may still refuse it."""

    def __init__(self, opener: Callable[[], BinaryIO], *, label: str, expected_sha256: str, sums_label: str,
                 progress: Progress | None = None,
                 gate: Callable[[CheckedImage], None] | None = None) -> None:  # fmt: skip
        self.opener = opener
        self.label = label
        self.expected = expected_sha256.lower()
        self.sums_label = sums_label
        self.progress = progress or Progress()
        self.gate = gate  # last checks on the proven image; raising cuts the stream before docker loads anything
        self.image: CheckedImage | None = None
        self.bytes_out = 0

    def __iter__(self) -> Iterator[bytes]:
        sha = hashlib.sha256()
        with self.opener() as fh:
            stream = ThreadedFrameStream(fh, on_compressed=lambda c: (sha.update(c), self.progress.advance(len(c))))
            try:
                tee = TeeStream(stream)
                check = TarCheck(self.label)
                yield from self._counted(self._members(tee, check))
                while tee.read_some(1 << 20):  # the tar trailer, and the end of the zstd stream
                    pass
            except (ZstdFormatError, TarFormatError, ArchiveFormatError) as exc:
                raise ArchiveDamaged(path=self.label, detail=str(exc)) from None
            finally:
                stream.close()
        found = sha.hexdigest()
        if found != self.expected:
            raise ArchiveHashMismatch(path=self.label, found=found, expected=self.expected, sums=self.sums_label)
        self.image = check.finish(found)
        if self.gate is not None:
            self.gate(self.image)
        yield from self._counted(tee.take(final=True))

    def _members(self, tee: TeeStream, check: TarCheck) -> Iterator[bytes]:
        for header, data in iter_members(tee):
            name = check.admit(header)  # before its header goes out: a refused member never reaches docker
            if name in METADATA:
                tee.hold = True
            self.progress.current(name if "/" not in name else name.rsplit("/", 1)[-1][:19])
            yield from tee.take()
            if header.type == "file":
                for _ in check.member(header, data.chunks()):
                    yield from tee.take()

    def _counted(self, pieces: Iterator[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            self.bytes_out += len(piece)
            yield piece
