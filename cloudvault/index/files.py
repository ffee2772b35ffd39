"""Index plain mirror files: BLAKE3 and piece hashes, secrets and doc text in one read, committed in batches."""

from __future__ import annotations

import os
from functools import partial

from cloudvault.catalog import files as catalog_files
from cloudvault.catalog.db import transaction
from cloudvault.hashing import CHUNK, hash_file_pieces, hash_stream_pieces
from cloudvault.index import versions
from cloudvault.index.context import MirrorContext
from cloudvault.index.secrets import MAX_SCANNED, TEXT_SNIFF
from cloudvault.models import FileStat, Flag
from cloudvault.pieces import PieceHasher

DOC_NAMES = {"SEARCH_INDEX.tsv", "CATALOG.md", "backup_status.json"}
MAX_DOC = 2 << 20
FILE_BATCH = 200


def is_doc(path: str, size: int) -> bool:
    name = path.rsplit("/", 1)[-1]
    return size <= MAX_DOC and (name.endswith(".md") or name in DOC_NAMES)


Read = tuple[str | None, bytes | None, list[Flag], str | None]  # BLAKE3, piece hashes, flags, doc text


def read_plain(ctx: MirrorContext, st: FileStat) -> Read:
    """BLAKE3, piece hashes, secrets found and doc text of one plain file, in one read (big files by mmap)."""
    if st.size > MAX_SCANNED:
        digest, pieces = _hash_big(ctx, st)
        ctx.progress.advance(st.size)
        return digest, pieces, [], None
    h, scanner, first, text = PieceHasher(), None, True, False
    doc_parts: list[bytes] | None = [] if is_doc(st.path, st.size) else None  # docs are small (≤ MAX_DOC)
    with ctx.mirror.open(st.path, st.raw_path) as fh:
        while chunk := fh.read(CHUNK):
            if first:
                scanner = ctx.rules.scanner(os.fsencode(st.path), st.size, chunk)
                text = b"\0" not in chunk[:TEXT_SNIFF]
            first = False
            h.update(chunk)
            if scanner:
                scanner.feed(chunk)
            if doc_parts is not None:
                doc_parts.append(chunk)
            ctx.progress.advance(len(chunk))
    flags = [Flag(kind, detail) for kind, detail in (scanner.findings() if scanner else [])]
    doc = None
    if doc_parts is not None and text:  # a text doc: stored with its secrets redacted
        doc = ctx.rules.redact(b"".join(doc_parts).decode("utf-8", "replace"))
    return h.hexdigest(), h.pieces(), flags, doc


def _hash_big(ctx: MirrorContext, st: FileStat) -> tuple[str, bytes | None]:
    if ctx.mirror.remote:
        with ctx.mirror.open(st.path, st.raw_path) as fh:
            return hash_stream_pieces(fh)
    return hash_file_pieces(ctx.mirror.full(st.path, st.raw_path))


def _read_one(ctx: MirrorContext, st: FileStat) -> Read:
    if st.path in ctx.secret_named:
        why = "the name or link target holds a credential: stored redacted, not read"
        return None, None, [Flag("secret", why)], None
    if st.kind == "symlink":
        return None, None, [], None
    try:
        digest, pieces, flags, doc = read_plain(ctx, st)
    except OSError as exc:
        return None, None, [Flag("unreadable", f"cannot read: {exc.strerror}")], None
    # a remote stat is a round trip per small file: there the archives (few, large, slow to read) are checked
    if not ctx.mirror.remote and ctx.changed_since_walk(st):
        flags.append(Flag("changed_while_indexing", "size or mtime changed while it was read; read again next run"))
    return digest, pieces, flags, doc


def read_files(ctx: MirrorContext, files: list[FileStat]) -> None:
    """Each plain file (and symlink) into the catalog; FILE_BATCH of them per transaction."""
    for start in range(0, len(files), FILE_BATCH):
        rows = []
        for st in files[start : start + FILE_BATCH]:
            ctx.progress.current(st.path)
            rows.append((st, *_read_one(ctx, st)))
        with transaction(ctx.conn):
            for st, digest, pieces, flags, doc in rows:
                entry = ctx.entry_for(st.path)
                version = versions.judged(ctx, st, digest, "ok", flags)
                ctx.report.files_read += 1
                if digest is not None:  # its bytes were read, whatever is then made of them
                    ctx.report.bytes_read += st.size
                if version.kept:  # changed in place or unreadable now: the recorded hash stays the reference
                    versions.keep_recorded(ctx, version, [f for f in flags if f.kind == "unreadable"])
                    continue
                insert = partial(catalog_files.insert_file, ctx.conn, ctx.mirror_id, entry, st, digest, pieces)
                file_id = versions.record_new(ctx, version, insert)
                catalog_files.insert_flags(ctx.conn, ctx.mirror_id, entry, file_id, flags)
                if doc is not None:
                    catalog_files.insert_doc(ctx.conn, file_id, doc)
                ctx.report.count(flags)
