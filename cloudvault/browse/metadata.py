"""Titles, descriptions and column help of the catalog's pages in `vault browse` (Datasette metadata)."""

from __future__ import annotations

from cloudvault.browse.queries import canned_queries

# table -> (description, {column: help}); the words of catalog/schema.sql, for people who never read it
TABLES: dict[str, tuple[str, dict[str, str]]] = {
    "mirrors": (
        "Each mirror root that was indexed.",
        {
            "root": "local path or fsspec URL of the mirror",
            "manifest": "metadata file the entries were joined with",
            "indexed_at": "when `vault index` last finished",
        },
    ),
    "entries": (
        "One row per experiment directory, with the manifest's metadata (entry '' is the top level).",
        {
            "entry_id": "directory name; any unique prefix names it (014, 014_ss20)",
            "what": "one-line summary",
            "node_gpu": "where it ran",
            "measured": "when it was measured",
            "size_text": "size recorded in CATALOG.md",
            "key_files": "the files to look at first ('; '-separated)",
            "caution": "what to know before using it",
            "settings": "recorded settings (JSON): model, commit, sampling, env vars, GPU assignment, totals",
            "present": "0: listed in the manifest but not found on disk",
        },
    ),
    "files": (
        "Every plain file and symlink of a mirror, with its BLAKE3.",
        {
            "path": "relative to the mirror root",
            "raw_path": "original bytes when the name is not UTF-8",
            "blake3": "BLAKE3 of the content (NULL for symlinks and unreadable files)",
            "mtime_ns": "modification time (ns)",
            "size": "bytes",
        },
    ),
    "archives": (
        "Every .tar.zst and the outcome of reading it.",
        {
            "status": "ok | not_zstd | corrupt_frame | truncated | not_tar | corrupt_header",
            "raw_size": "decompressed bytes",
            "member_count": "tar members",
            "frame_count": "zstd frames",
            "list_status": "comparison with the .tar.zst.list beside it: match | mismatch | NULL (none)",
        },
    ),
    "frames": (
        "The zstd frame table of each archive: where `vault extract` enters it.",
        {"comp_offset": "byte offset in the .tar.zst", "raw_offset": "offset in the decompressed tar"},
    ),
    "members": (
        "Every tar member of every archive.",
        {
            "path": "member path ('./' removed)",
            "type": "file | dir | symlink | hardlink | device | fifo",
            "size": "bytes",
            "blake3": "BLAKE3 of the member's data",
            "data_offset": "offset of its data in the tar",
            "header_offset": "offset of its first header block",
            "mtime": "seconds since the epoch",
        },
    ),
    "docs": ("Text of the mirror's documentation (README, ENVIRONMENT.md ...), secrets redacted.", {}),
    "flags": (
        "Cautions and findings of the indexer: damage, unsafe members, list mismatches, secrets.",
        {
            "kind": "secret | corrupt_frame | truncated | not_tar | unsafe_member | list_mismatch | ...",
            "member": "member path inside the archive, when it is about one",
            "detail": "what was found (a secret's rule and line, never its value)",
        },
    ),
    "seekable": ("Seekable copies written by `vault optimize` (beside the catalog, never in the mirror).", {}),
    "seekable_frames": ("Frame tables of the seekable copies.", {}),
    "restores": (
        "Every restore: a conda env unpacked, a docker image loaded.",
        {
            "source": "archive path in the mirror, or registry reference",
            "source_hash": "archive BLAKE3 or digest",
            "target": "prefix restored to, or image id loaded",
            "status": "ok | failed | interrupted",
            "detail": "what was checked and rewritten (JSON)",
        },
    ),
    "runs": (
        "Every reproduction run of `vault repro`.",
        {
            "run_id": "name of the run",
            "executor": "local | docker | slurm",
            "job_id": "Slurm job or container id",
            "folder": "run folder (provenance.json, compare.csv, REPORT.md)",
            "status": "queued | running | finished | failed | interrupted",
            "verdict": "REPRODUCED | OUTPUTS_DIVERGED | TIMINGS_CHANGED | NOT_COMPARABLE",
            "summary": "totals (JSON)",
        },
    ),
    "run_requests": (
        "One row per compared request of a run.",
        {
            "verdict": "identical | within_tolerance | diverged | missing | extra",
            "first_divergence": "index of the first output token that differs",
        },
    ),
    "meta": ("Schema and tool version of the catalog.", {}),
}
HIDDEN = ("entries_fts", "files_fts", "members_fts", "docs_fts")
LABELS = {"mirrors": "name", "entries": "entry_id", "runs": "run_id"}
JOURNEYS = (
    ("search?q=granite", "Search everything"),
    ("entry?entry=014", "One entry"),
    ("archives", "Archives"),
    ("members?archive=&path=", "Archive members"),
    ("flags?entry=", "Flags and damage"),
    ("restores?entry=", "Restores done"),
    ("runs?entry=", "Reproduction runs"),
)


def metadata(database: str, base: str) -> dict:
    """Datasette metadata for the catalog served as `database` under the URL path base (e.g. /catalog)."""
    links = "".join(f'<li><a href="{base}/{path}">{title}</a></li>' for path, title in JOURNEYS)
    about = (
        "Read-only view of the cloudvault catalog: what the mirror holds, where, with which settings, and what vault "
        "restored and re-ran. Every hit has the <code>vault</code> command that fetches it."
    )
    search = (
        f'<form action="{base}/search" method="get"><input type="search" name="q" placeholder="granite, 670bf1c4, '
        'b16r64 ..." size="40"> <input type="submit" value="Search everything"></form>'
    )
    tables = {
        name: {"description": text, "columns": columns, **({"label_column": LABELS[name]} if name in LABELS else {})}
        for name, (text, columns) in TABLES.items()
    }
    tables.update({name: {"hidden": True} for name in HIDDEN})
    return {
        "title": "cloudvault catalog",
        "description_html": f"<p>{about}</p>{search}<ul>{links}</ul>",
        "databases": {
            database: {
                "title": "cloudvault catalog",
                "description_html": f"<p>{about}</p>{search}",
                "tables": tables,
                "queries": canned_queries(),
            }
        },
    }
