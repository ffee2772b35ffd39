"""Index plain mirror files: BLAKE3, secrets and doc text in one read, committed in batches."""

from __future__ import annotations

import os
from functools import partial

import blake3

from cloudvault.catalog import files as catalog_files
from cloudvault.catalog.db import transaction
from cloudvault.hashing import CHUNK
from cloudvault.index import versions
from cloudvault.index.context import MirrorContext
from cloudvault.index.secrets import MAX_SCANNED, TEXT_SNIFF
from cloudvault.models import FileStat, Flag

DOC_NAMES = {"SEARCH_INDEX.tsv", "CATALOG.md", "backup_status.json"}
MAX_DOC = 2 << 20
FILE_BATCH = 200


def is_doc(path: str, size: int) -> bool:
    name = path.rsplit("/", 1)[-1]
    return size <= MAX_DOC and (name.endswith(".md") or name in DOC_NAMES)


def read_plain(ctx: MirrorContext, st: FileStat) -> tuple[str | None, list[Flag], str | None]:
    """BLAKE3, secrets found and doc text of one plain file, in one read (big files are hashed by mmap)."""
    if st.size > MAX_SCANNED:
        digest = ctx.mirror.hash(st.path, st.raw_path)
        ctx.progress.advance(st.size)
        return digest, [], None
    h, scanner, first, text = blake3.blake3(), None, True, False
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
    return h.hexdigest(), flags, doc


def _read_one(ctx: MirrorContext, st: FileStat) -> tuple[str | None, list[Flag], str | None]:
    if st.path in ctx.secret_named:
        return None, [Flag("secret", "the name or link target holds a credential: stored redacted, not read")], None
    if st.kind == "symlink":
        return None, [], None
    try:
        digest, flags, doc = read_plain(ctx, st)
    except OSError as exc:
        return None, [Flag("unreadable", f"cannot read: {exc.strerror}")], None
    # a remote stat is a round trip per small file: there the archives (few, large, slow to read) are checked
    if not ctx.mirror.remote and ctx.changed_since_walk(st):
        flags.append(Flag("changed_while_indexing", "size or mtime changed while it was read; read again next run"))
    return digest, flags, doc


def read_files(ctx: MirrorContext, files: list[FileStat]) -> None:
    """Each plain file (and symlink) into the catalog; FILE_BATCH of them per transaction."""
    for start in range(0, len(files), FILE_BATCH):
        rows = []
        for st in files[start : start + FILE_BATCH]:
            ctx.progress.current(st.path)
            rows.append((st, *_read_one(ctx, st)))
        with transaction(ctx.conn):
            for st, digest, flags, doc in rows:
                entry = ctx.entry_for(st.path)
                version = versions.judged(ctx, st, digest, "ok", flags)
                ctx.report.files_read += 1
                if version.kept:  # changed in place or unreadable now: the recorded hash stays the reference
                    versions.keep_recorded(ctx, version, [f for f in flags if f.kind == "unreadable"])
                    continue
                insert = partial(catalog_files.insert_file, ctx.conn, ctx.mirror_id, entry, st, digest)
                file_id = versions.record_new(ctx, version, insert)
                catalog_files.insert_flags(ctx.conn, ctx.mirror_id, entry, file_id, flags)
                if doc is not None:
                    catalog_files.insert_doc(ctx.conn, file_id, doc)
                ctx.report.count(flags)
                ctx.report.bytes_read += st.size
