-- cloudvault catalog, schema version 1. Applied idempotently by catalog.db.open_catalog.
-- Paths are stored as UTF-8 text; where a name is not valid UTF-8 (or differs from its text form) the raw
-- bytes are kept in raw_path so nothing is lost.

CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- One row per mirror root that was indexed (a local path today; ssh:// and s3:// URLs through fsspec later).
CREATE TABLE IF NOT EXISTS mirrors (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    root        TEXT NOT NULL,
    manifest    TEXT,
    indexed_at  TEXT
);

-- One row per top-level directory of a mirror, joined with its manifest metadata.
-- entry_id '' is the mirror's top level (HOW_TO_USE.md, CATALOG.md ...).
CREATE TABLE IF NOT EXISTS entries (
    id          INTEGER PRIMARY KEY,
    mirror_id   INTEGER NOT NULL REFERENCES mirrors(id) ON DELETE CASCADE,
    entry_id    TEXT NOT NULL,
    what        TEXT NOT NULL DEFAULT '',
    node_gpu    TEXT NOT NULL DEFAULT '',
    measured    TEXT NOT NULL DEFAULT '',
    size_text   TEXT NOT NULL DEFAULT '',
    key_files   TEXT NOT NULL DEFAULT '',   -- '; '-separated, as in CATALOG.md
    caution     TEXT NOT NULL DEFAULT '',
    settings    TEXT NOT NULL DEFAULT '{}', -- JSON from the manifest (model, commit, sampling, env vars, totals)
    present     INTEGER NOT NULL DEFAULT 1, -- 0: in the manifest but not found on disk
    UNIQUE (mirror_id, entry_id)
);

-- Every plain file and symlink of a mirror. (size, mtime_ns, inode, ctime_ns) decide whether to re-read it.
CREATE TABLE IF NOT EXISTS files (
    id          INTEGER PRIMARY KEY,
    mirror_id   INTEGER NOT NULL REFERENCES mirrors(id) ON DELETE CASCADE,
    entry_id    TEXT NOT NULL,
    path        TEXT NOT NULL,              -- relative to the mirror root
    raw_path    BLOB,
    kind        TEXT NOT NULL,              -- file | symlink
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    ctime_ns    INTEGER NOT NULL,
    inode       INTEGER NOT NULL,
    mode        INTEGER NOT NULL,
    link_target TEXT,
    blake3      TEXT,                       -- NULL for symlinks and unreadable files
    pieces      BLOB,                       -- v5: piece hashes of its bytes (see below)
    generation  INTEGER NOT NULL DEFAULT 0, -- v6: the index run that recorded this content (see generations)
    UNIQUE (mirror_id, path)
);
CREATE INDEX IF NOT EXISTS files_entry ON files(mirror_id, entry_id);

-- Every archive (a .tar.zst, or another format: archive/formats.py), with its zstd frame table (a zstd one's) and
-- the outcome of reading it.
CREATE TABLE IF NOT EXISTS archives (
    id            INTEGER PRIMARY KEY,
    file_id       INTEGER NOT NULL UNIQUE REFERENCES files(id) ON DELETE CASCADE,
    status        TEXT NOT NULL,            -- ok | not_zstd | corrupt_frame | truncated | bad_crc | corrupt_stream
                                            -- | not_tar | corrupt_header
    raw_size      INTEGER NOT NULL,         -- decompressed bytes read
    member_count  INTEGER NOT NULL,
    frame_count   INTEGER NOT NULL,
    list_status   TEXT,                     -- NULL: no .list beside it | match | mismatch
    format        TEXT NOT NULL DEFAULT 'tar.zst'  -- schema 7: archive/formats.py's name (tar.zst | tar | tar.gz ...)
);

CREATE TABLE IF NOT EXISTS frames (
    archive_id   INTEGER NOT NULL REFERENCES archives(id) ON DELETE CASCADE,
    idx          INTEGER NOT NULL,
    comp_offset  INTEGER NOT NULL,
    comp_size    INTEGER NOT NULL,
    raw_offset   INTEGER NOT NULL,
    raw_size     INTEGER NOT NULL,
    PRIMARY KEY (archive_id, idx)
) WITHOUT ROWID;

-- Every tar member; offsets are into the decompressed stream (header_offset: first of its header blocks).
CREATE TABLE IF NOT EXISTS members (
    id            INTEGER PRIMARY KEY,
    archive_id    INTEGER NOT NULL REFERENCES archives(id) ON DELETE CASCADE,
    path          TEXT NOT NULL,            -- leading './' removed
    raw_path      BLOB,
    type          TEXT NOT NULL,            -- file | dir | symlink | hardlink | chardev | blockdev | fifo | ...
    size          INTEGER NOT NULL,
    mode          INTEGER NOT NULL,
    mtime         INTEGER NOT NULL,
    uid           INTEGER NOT NULL,
    gid           INTEGER NOT NULL,
    uname         TEXT NOT NULL,
    gname         TEXT NOT NULL,
    link_target   TEXT,
    header_offset INTEGER NOT NULL,
    data_offset   INTEGER NOT NULL,
    blake3        TEXT,                     -- of the member's data as extracted; NULL for types without data
    raw_link_target BLOB,                   -- v4: the link target's bytes where link_target's text would lose them
    sparse_map    TEXT,                     -- v4: a sparse member's pieces (JSON pairs: offset and length)
    pieces        BLOB                      -- v5: piece hashes of its data as extracted (see below)
);
-- A sparse member's size is its expanded size and its blake3 that of the expanded bytes (holes as zeros); the
-- stored pieces start at data_offset, one after another.
CREATE INDEX IF NOT EXISTS members_archive_path ON members(archive_id, path);
-- Schema version 5, piece hashes: `pieces` holds the BLAKE3 of each 1 MiB of an object's bytes (a plain file's, an
-- archive file's compressed bytes, a member's data as extracted), each cut to 16 bytes, concatenated: 16 bytes per
-- MiB, 15.3 MB per TB. Every read verifies the pieces it hands out before handing them out. NULL for an object of
-- one piece or less (its blake3 is its piece's hash), and for an object recorded before version 5 (a size over
-- 1 MiB and no pieces: read whole and checked before any byte goes out, until `vault index` records them).

-- Text of the mirror's documentation (README, ENVIRONMENT.md ...), secrets redacted, for search and show.
CREATE TABLE IF NOT EXISTS docs (
    id       INTEGER PRIMARY KEY,
    file_id  INTEGER NOT NULL UNIQUE REFERENCES files(id) ON DELETE CASCADE,
    body     TEXT NOT NULL
);

-- Cautions and findings: damage, unsafe member paths, list mismatches, secrets (never the secret itself).
CREATE TABLE IF NOT EXISTS flags (
    id         INTEGER PRIMARY KEY,
    mirror_id  INTEGER NOT NULL REFERENCES mirrors(id) ON DELETE CASCADE,
    entry_id   TEXT NOT NULL,
    file_id    INTEGER REFERENCES files(id) ON DELETE CASCADE,
    member     TEXT,                        -- member path inside the archive, when it is about one
    kind       TEXT NOT NULL,
    detail     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS flags_entry ON flags(mirror_id, entry_id);
CREATE INDEX IF NOT EXISTS flags_file ON flags(file_id);

-- Search: FTS5 with the trigram tokenizer (substring matches: granite, b16r64, 670bf1c4), as external-content
-- tables over the rows above, so the text is stored once. Triggers keep them in step, but for a member's insert:
-- `vault index` fills members_fts in one pass after an archive's rows, in the same transaction
-- (catalog/files.py build_member_search; schema version 9), which a trigger per row made ~0.5 us a member dearer.
-- The path tables keep no column sizes (columnsize=0, schema version 11): only a ranking reads them, and no path
-- search ranks its hits; writing them was ~35% of filling members_fts for 200k small members.
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(
    entry_id, what, node_gpu, key_files, caution, settings,
    content='entries', content_rowid='id', tokenize='trigram');
CREATE VIRTUAL TABLE IF NOT EXISTS files_fts USING fts5(
    path, content='files', content_rowid='id', tokenize='trigram', columnsize=0);
CREATE VIRTUAL TABLE IF NOT EXISTS members_fts USING fts5(
    path, content='members', content_rowid='id', tokenize='trigram', columnsize=0);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
    body, content='docs', content_rowid='id', tokenize='trigram');

CREATE TRIGGER IF NOT EXISTS entries_ai AFTER INSERT ON entries BEGIN
    INSERT INTO entries_fts(rowid, entry_id, what, node_gpu, key_files, caution, settings)
    VALUES (new.id, new.entry_id, new.what, new.node_gpu, new.key_files, new.caution, new.settings);
END;
CREATE TRIGGER IF NOT EXISTS entries_ad AFTER DELETE ON entries BEGIN
    INSERT INTO entries_fts(entries_fts, rowid, entry_id, what, node_gpu, key_files, caution, settings)
    VALUES ('delete', old.id, old.entry_id, old.what, old.node_gpu, old.key_files, old.caution, old.settings);
END;
CREATE TRIGGER IF NOT EXISTS entries_au AFTER UPDATE ON entries BEGIN
    INSERT INTO entries_fts(entries_fts, rowid, entry_id, what, node_gpu, key_files, caution, settings)
    VALUES ('delete', old.id, old.entry_id, old.what, old.node_gpu, old.key_files, old.caution, old.settings);
    INSERT INTO entries_fts(rowid, entry_id, what, node_gpu, key_files, caution, settings)
    VALUES (new.id, new.entry_id, new.what, new.node_gpu, new.key_files, new.caution, new.settings);
END;
CREATE TRIGGER IF NOT EXISTS files_ai AFTER INSERT ON files BEGIN
    INSERT INTO files_fts(rowid, path) VALUES (new.id, new.path);
END;
CREATE TRIGGER IF NOT EXISTS files_ad AFTER DELETE ON files BEGIN
    INSERT INTO files_fts(files_fts, rowid, path) VALUES ('delete', old.id, old.path);
END;
CREATE TRIGGER IF NOT EXISTS members_ad AFTER DELETE ON members BEGIN
    INSERT INTO members_fts(members_fts, rowid, path) VALUES ('delete', old.id, old.path);
END;
CREATE TRIGGER IF NOT EXISTS docs_ai AFTER INSERT ON docs BEGIN
    INSERT INTO docs_fts(rowid, body) VALUES (new.id, new.body);
END;
CREATE TRIGGER IF NOT EXISTS docs_ad AFTER DELETE ON docs BEGIN
    INSERT INTO docs_fts(docs_fts, rowid, body) VALUES ('delete', old.id, old.body);
END;

-- Schema version 2: seekable copies of single-frame archives (`vault optimize`), kept in the cache folder beside
-- the catalog, never in the mirror. Same decompressed bytes as the original, cut into independent frames, so
-- members' offsets and BLAKE3 stay valid; extraction prefers the copy and falls back to the original.
CREATE TABLE IF NOT EXISTS seekable (
    archive_id   INTEGER PRIMARY KEY REFERENCES archives(id) ON DELETE CASCADE,
    path         TEXT NOT NULL,             -- absolute path of the copy
    comp_size    INTEGER NOT NULL,
    frame_count  INTEGER NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS seekable_frames (
    archive_id   INTEGER NOT NULL REFERENCES seekable(archive_id) ON DELETE CASCADE,
    idx          INTEGER NOT NULL,
    comp_offset  INTEGER NOT NULL,
    comp_size    INTEGER NOT NULL,
    raw_offset   INTEGER NOT NULL,
    raw_size     INTEGER NOT NULL,
    PRIMARY KEY (archive_id, idx)
) WITHOUT ROWID;

-- Schema version 3: what vault did with the mirror. Every restore (a conda env unpacked, a docker image loaded)
-- and every reproduction run is recorded here, so `vault search restored`, `vault show 015` and `vault runs 014`
-- find them. detail/summary are JSON; they never hold a credential.
CREATE TABLE IF NOT EXISTS restores (
    id           INTEGER PRIMARY KEY,
    kind         TEXT NOT NULL,             -- env | docker
    mirror_id    INTEGER REFERENCES mirrors(id) ON DELETE SET NULL,
    entry_id     TEXT NOT NULL,             -- the entry the source came from (015, 017, _docker)
    name         TEXT NOT NULL,             -- env name, image name
    source       TEXT NOT NULL,             -- archive path in the mirror, or registry reference
    source_hash  TEXT,                      -- archive BLAKE3 / sha256, or image digest
    target       TEXT NOT NULL,             -- prefix restored to, or image id loaded
    status       TEXT NOT NULL,             -- ok | failed | interrupted
    detail       TEXT NOT NULL DEFAULT '{}',
    started_at   TEXT NOT NULL,
    finished_at  TEXT
);
CREATE INDEX IF NOT EXISTS restores_entry ON restores(mirror_id, entry_id);

CREATE TABLE IF NOT EXISTS runs (
    id           INTEGER PRIMARY KEY,
    run_id       TEXT NOT NULL UNIQUE,      -- e.g. 014_ss20_temp0-20261203T101500Z
    recipe       TEXT NOT NULL,
    recipe_hash  TEXT NOT NULL,
    mirror_id    INTEGER REFERENCES mirrors(id) ON DELETE SET NULL,
    entry_id     TEXT NOT NULL,             -- the entry it reproduces
    executor     TEXT NOT NULL,             -- local | docker | slurm
    job_id       TEXT,                      -- Slurm job id, container id
    folder       TEXT NOT NULL,             -- the run folder (provenance.json, compare.csv, REPORT.md)
    status       TEXT NOT NULL,             -- queued | running | finished | failed | interrupted
    verdict      TEXT,                      -- REPRODUCED | WITHIN_TOLERANCE | DIVERGED | NOT_COMPARABLE
    summary      TEXT NOT NULL DEFAULT '{}',
    started_at   TEXT NOT NULL,
    finished_at  TEXT
);
CREATE INDEX IF NOT EXISTS runs_entry ON runs(mirror_id, entry_id);

-- One row per compared request (or file) of a run: the per-request table of `vault repro` / `vault compare`.
CREATE TABLE IF NOT EXISTS run_requests (
    run_id            INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    request           TEXT NOT NULL,
    verdict           TEXT NOT NULL,        -- identical | within_tolerance | diverged | missing | extra
    first_divergence  INTEGER,              -- index of the first differing output token
    detail            TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, request)
) WITHOUT ROWID;

-- Schema version 6: every `vault index` run is a generation, numbered and kept. A files row's generation is the
-- run that recorded its content: a file read again with the same bytes keeps it, so unchanged rows are never
-- copied. A version replaced (modified) or gone (removed) moves to file_history, an archive's members with it,
-- so what each generation held can be compared (`vault diff`). Same size and mtime but other bytes is not a new
-- version but suspected corruption (`changed_in_place`): the recorded hash stays the reference, and an archive
-- intact when recorded and damaged now keeps its recorded members. Generation 0: what a catalog held before
-- generations were kept (recorded then, never checked again by this schema).
CREATE TABLE IF NOT EXISTS generations (
    id               INTEGER PRIMARY KEY,
    started_at       TEXT NOT NULL,
    finished_at      TEXT,                  -- NULL: the run stopped before its end (what it committed is kept)
    mirrors          TEXT NOT NULL DEFAULT '[]',  -- JSON list of the mirror names it indexed
    seen             INTEGER NOT NULL DEFAULT 0,  -- files walked
    read             INTEGER NOT NULL DEFAULT 0,  -- files read (new, or their stat changed)
    added            INTEGER NOT NULL DEFAULT 0,
    modified         INTEGER NOT NULL DEFAULT 0,
    removed          INTEGER NOT NULL DEFAULT 0,
    changed_in_place INTEGER NOT NULL DEFAULT 0,
    newly_damaged    INTEGER NOT NULL DEFAULT 0   -- archives intact as recorded, damaged now (members kept)
);

CREATE TABLE IF NOT EXISTS file_history (
    id           INTEGER PRIMARY KEY,
    mirror_id    INTEGER NOT NULL REFERENCES mirrors(id) ON DELETE CASCADE,
    path         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    size         INTEGER NOT NULL,
    mtime_ns     INTEGER NOT NULL,
    link_target  TEXT,
    blake3       TEXT,
    generation   INTEGER NOT NULL,          -- the generation that recorded this version
    replaced_in  INTEGER NOT NULL,          -- the generation that found it modified or removed
    archive      INTEGER NOT NULL DEFAULT 0 -- 1: an archive; its members are in member_history
);
CREATE INDEX IF NOT EXISTS file_history_path ON file_history(mirror_id, path);

CREATE TABLE IF NOT EXISTS member_history (
    history_id   INTEGER NOT NULL REFERENCES file_history(id) ON DELETE CASCADE,
    path         TEXT NOT NULL,
    type         TEXT NOT NULL,
    size         INTEGER NOT NULL,
    blake3       TEXT
);
CREATE INDEX IF NOT EXISTS member_history_file ON member_history(history_id);

-- What a run found that is not a new version: changed_in_place (the bytes differ from the reference, size and
-- mtime do not) and damaged (an archive intact as recorded, damaged now). found: the BLAKE3 the run read.
CREATE TABLE IF NOT EXISTS generation_events (
    generation   INTEGER NOT NULL REFERENCES generations(id) ON DELETE CASCADE,
    mirror_id    INTEGER NOT NULL REFERENCES mirrors(id) ON DELETE CASCADE,
    path         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    expected     TEXT,
    found        TEXT
);
CREATE INDEX IF NOT EXISTS generation_events_gen ON generation_events(generation);

-- Schema version 7: seek points of a compressed archive that has no frames of its own (gzip, bzip2), made while it
-- was indexed, so a member is read by decoding from the point before it, not from the start. An xz archive's
-- blocks are in its own index and a plain tar is read where it lies: they have none here.
CREATE TABLE IF NOT EXISTS seek_points (
    archive_id   INTEGER PRIMARY KEY REFERENCES archives(id) ON DELETE CASCADE,
    kind         TEXT NOT NULL,             -- gzip (rapidgzip's exported index) | bzip2 (block offsets, JSON)
    data         BLOB NOT NULL
);

-- Schema version 8: archives inside archives, one level (archive/nested.py). A member whose bytes are a tar (plain or
-- compressed) is read once more; its members are rows of the outer archive named through it (data/x.tgz/src/a.txt),
-- their offsets in this nested archive's place in the outer archive's raw space (past the outer's own bytes).
CREATE TABLE IF NOT EXISTS nested (
    archive_id    INTEGER NOT NULL REFERENCES archives(id) ON DELETE CASCADE,
    raw_offset    INTEGER NOT NULL,         -- where its decoded bytes start in the outer archive's raw space
    raw_size      INTEGER NOT NULL,
    format        TEXT NOT NULL,            -- archive/formats.py's name of the inner archive
    status        TEXT NOT NULL,            -- its scan's outcome (ok, or the damage it was flagged with)
    member_path   TEXT NOT NULL,            -- the outer member whose bytes it is
    member_offset INTEGER NOT NULL,         -- that member's data offset
    PRIMARY KEY (archive_id, raw_offset)
) WITHOUT ROWID;
