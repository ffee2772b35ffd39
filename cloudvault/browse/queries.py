"""The canned queries of `vault browse`: one page per journey, as read-only SQL over the catalog.

Search is built from `catalog.query.SEARCH_SQL`, the very statements `vault search` runs, so the page and the
command find the same rows; the `vault_*` SQL functions they call are registered by `browse.plugin`.
"""

from __future__ import annotations

from cloudvault.catalog.query import KINDS, SEARCH_SQL

PER_KIND = 100  # rows per kind on the search page; `vault search --limit 0` lists all
HIT_COLUMNS = "kind, entry, path, archive, size, blake3, mirror, text, mirror_id"


def _search_branches(kind: str) -> list[str]:
    """The SELECTs of one kind: FTS5 trigram when every term has 3+ characters, else the substring scan."""
    fts_sql, _alias, like_col, like_sql = SEARCH_SQL[kind]
    scan = f"vault_has_terms({like_col}, :q)"
    if fts_sql is None:  # restores and runs: few rows, always scanned
        return [like_sql.format(like=scan, filter="")]
    fts = fts_sql.format(filter="").replace("MATCH ?", "MATCH vault_match(:q)")
    return [fts, like_sql.format(like=f"vault_needs_scan(:q) AND {scan}", filter="")]


def search_sql() -> str:
    """Every kind's hits (at most PER_KIND each), with the entry's cautions, a link and the vault command."""
    branches = [f"SELECT * FROM ({sql} LIMIT {PER_KIND})" for kind in KINDS for sql in _search_branches(kind)]
    order = " ".join(f"WHEN '{kind}' THEN {rank}" for rank, kind in enumerate(KINDS))
    return (
        f"WITH hits({HIT_COLUMNS}) AS (\n  " + "\n  UNION ALL ".join(branches) + "\n)\n"
        "SELECT h.kind, h.entry, h.path, vault_cautions(h.mirror_id, h.entry) AS cautions,\n"
        "  vault_command(h.kind, vault_entry_name(h.mirror_id, h.entry), h.path, h.archive) AS command,\n"
        "  vault_open(h.kind, vault_entry_name(h.mirror_id, h.entry), h.path, h.archive) AS open,\n"
        "  CASE h.kind WHEN 'doc' THEN vault_snippet(h.text, :q) ELSE h.text END AS text,\n"
        "  h.archive AS in_archive, h.size, h.blake3\n"
        f"FROM hits h ORDER BY CASE h.kind {order} END, h.entry, h.path"
    )


# One entry as (field, value, open) rows: a card rather than a 20-column table.
ENTRY_SQL = """
WITH e AS (SELECT * FROM entries WHERE id = vault_entry_row(:entry))
SELECT 'not found' AS field, vault_entry_problem(:entry) AS value, NULL AS open
  WHERE vault_entry_problem(:entry) IS NOT NULL
UNION ALL SELECT 'entry', e.entry_id, NULL FROM e
UNION ALL SELECT 'what', e.what, NULL FROM e
UNION ALL SELECT 'node/GPU', e.node_gpu, NULL FROM e
UNION ALL SELECT 'measured', e.measured, NULL FROM e
UNION ALL SELECT 'size (recorded)', e.size_text, NULL FROM e
UNION ALL SELECT 'on disk', CASE e.present WHEN 0 THEN 'not found on disk' ELSE
    (SELECT count(*) || ' files, ' || coalesce(sum(size), 0) || ' bytes' FROM files f
     WHERE f.mirror_id = e.mirror_id AND f.entry_id = e.entry_id) END, NULL FROM e
UNION ALL SELECT 'key files', e.key_files, NULL FROM e
UNION ALL SELECT 'cautions', coalesce(nullif(vault_cautions(e.mirror_id, e.entry_id), ''), 'none recorded'),
    vault_link('flags', 'entry', vault_entry_name(e.mirror_id, e.entry_id)) FROM e
UNION ALL SELECT 'setting ' || j.key,
    CASE j.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE j.value END, NULL
  FROM e, json_each(e.settings) j
UNION ALL SELECT 'archive', f.path || ' (' || a.member_count || ' members, ' || a.frame_count || ' frames, ' ||
    a.status || ')', vault_link('members', 'archive', f.path)
  FROM e JOIN files f ON f.mirror_id = e.mirror_id AND f.entry_id = e.entry_id JOIN archives a ON a.file_id = f.id
UNION ALL SELECT 'restore', r.kind || ' ' || r.name || ' -> ' || r.target || ': ' || r.status,
    vault_link('restores', 'entry', vault_entry_name(e.mirror_id, e.entry_id))
  FROM e JOIN restores r ON r.mirror_id = e.mirror_id AND r.entry_id = e.entry_id
UNION ALL SELECT 'run ' || r.run_id, r.status || ' ' || coalesce(r.verdict, ''), vault_link('run', 'run', r.run_id)
  FROM e JOIN runs r ON r.mirror_id = e.mirror_id AND r.entry_id = e.entry_id
UNION ALL SELECT 'ENVIRONMENT.md', d.body, NULL
  FROM e JOIN files f ON f.mirror_id = e.mirror_id AND f.path = e.entry_id || '/ENVIRONMENT.md'
  JOIN docs d ON d.file_id = f.id
UNION ALL SELECT 'command', vault_command('entry', vault_entry_name(e.mirror_id, e.entry_id), NULL, NULL), NULL
  FROM e
"""

MEMBERS_SQL = """
SELECT f.entry_id AS entry, f.path AS archive, mb.path, mb.type, mb.size, mb.blake3, mb.data_offset,
  datetime(mb.mtime, 'unixepoch') AS mtime,
  vault_command('member', vault_entry_name(f.mirror_id, f.entry_id), mb.path, f.path) AS command
FROM members mb JOIN archives a ON a.id = mb.archive_id JOIN files f ON f.id = a.file_id
WHERE (:archive = '' OR instr(lower(f.path), lower(:archive)) > 0)
  AND (:path = '' OR instr(lower(mb.path), lower(:path)) > 0)
ORDER BY f.path, mb.data_offset
"""

ARCHIVES_SQL = """
SELECT f.entry_id AS entry, f.path AS archive, a.status, f.size AS compressed, a.raw_size, a.member_count,
  a.frame_count, a.list_status, f.blake3, s.path IS NOT NULL AS seekable_copy,
  vault_link('members', 'archive', f.path) AS open
FROM archives a JOIN files f ON f.id = a.file_id LEFT JOIN seekable s ON s.archive_id = a.id
ORDER BY f.path
"""

FLAGS_SQL = """
SELECT fl.entry_id AS entry, fl.kind, f.path, fl.member, fl.detail, a.status AS archive_status,
  vault_link('entry', 'entry', vault_entry_name(fl.mirror_id, fl.entry_id)) AS open
FROM flags fl LEFT JOIN files f ON f.id = fl.file_id LEFT JOIN archives a ON a.file_id = f.id
WHERE :entry = '' OR (fl.mirror_id, fl.entry_id) =
  (SELECT mirror_id, entry_id FROM entries WHERE id = vault_entry_row(:entry))
ORDER BY fl.entry_id, fl.kind, f.path, fl.member
"""

RESTORES_SQL = """
SELECT r.id, r.kind, r.entry_id AS entry, r.name, r.source, r.source_hash, r.target, r.status, r.started_at,
  r.finished_at, r.detail, vault_link('entry', 'entry', vault_entry_name(r.mirror_id, r.entry_id)) AS open
FROM restores r
WHERE :entry = '' OR (r.mirror_id, r.entry_id) =
  (SELECT mirror_id, entry_id FROM entries WHERE id = vault_entry_row(:entry))
ORDER BY r.id DESC
"""

RUNS_SQL = """
SELECT r.run_id, r.entry_id AS entry, r.recipe, r.executor, r.job_id, r.status, r.verdict,
  (SELECT group_concat(n || ' ' || verdict, ', ') FROM (SELECT verdict, count(*) AS n FROM run_requests q
    WHERE q.run_id = r.id GROUP BY verdict ORDER BY verdict)) AS requests,
  r.started_at, r.finished_at, r.folder, vault_link('run', 'run', r.run_id) AS open
FROM runs r
WHERE :entry = '' OR (r.mirror_id, r.entry_id) =
  (SELECT mirror_id, entry_id FROM entries WHERE id = vault_entry_row(:entry))
ORDER BY r.started_at DESC, r.id DESC
"""

RUN_SQL = """
WITH r AS (SELECT * FROM runs WHERE run_id = :run)
SELECT 'not found' AS field, 'no run ' || quote(:run) || ' in the catalog; see the runs page' AS value,
  'runs?entry=' AS open WHERE NOT EXISTS (SELECT 1 FROM r)
UNION ALL SELECT 'run', r.run_id, NULL FROM r
UNION ALL SELECT 'verdict', coalesce(r.verdict, '(none yet)'), NULL FROM r
UNION ALL SELECT 'status', r.status, NULL FROM r
UNION ALL SELECT 'entry', r.entry_id, vault_link('entry', 'entry', vault_entry_name(r.mirror_id, r.entry_id)) FROM r
UNION ALL SELECT 'recipe', r.recipe || ' (' || r.recipe_hash || ')', NULL FROM r
UNION ALL SELECT 'executor', r.executor || coalesce(' job ' || r.job_id, ''), NULL FROM r
UNION ALL SELECT 'folder', r.folder, NULL FROM r
UNION ALL SELECT 'started', r.started_at, NULL FROM r
UNION ALL SELECT 'finished', r.finished_at, NULL FROM r
UNION ALL SELECT 'summary ' || j.key, j.value, NULL FROM r, json_each(r.summary) j
UNION ALL SELECT 'requests ' || q.verdict, count(*), vault_link('run_requests', 'run', r.run_id)
  FROM r JOIN run_requests q ON q.run_id = r.id GROUP BY q.verdict
"""

RUN_REQUESTS_SQL = """
SELECT q.request, q.verdict, q.first_divergence, q.detail, r.verdict AS run_verdict
FROM run_requests q JOIN runs r ON r.id = q.run_id
WHERE r.run_id = :run
ORDER BY q.verdict = 'identical', q.request
"""


def canned_queries() -> dict[str, dict]:
    """name -> Datasette canned query (title, description, SQL); none of them writes. The SQL is one click away."""
    queries = {
        "search": {
            "title": "Search everything",
            "description": "Entries, docs, files, archive members, restores and runs whose text holds every word "
            "(case-insensitive substrings; the same FTS5 trigram query as `vault search`). Each hit shows its "
            f"entry's cautions and the vault command that fetches it. At most {PER_KIND} hits per kind.",
            "sql": search_sql(),
        },
        "entry": {
            "title": "One entry",
            "description": "An experiment directory by ID or unique prefix (014, 014_ss20): what it is, where it "
            "ran, its cautions, recorded settings, archives, restores, runs and ENVIRONMENT.md.",
            "sql": ENTRY_SQL,
        },
        "archives": {
            "title": "Archives",
            "description": "Every .tar.zst with its state, sizes, member and frame counts and BLAKE3.",
            "sql": ARCHIVES_SQL,
        },
        "members": {
            "title": "Archive members",
            "description": "Members of the archives whose path contains `archive` (blank: all), with size, "
            "BLAKE3 and the `vault extract` command for each; `path` narrows by member path.",
            "sql": MEMBERS_SQL,
        },
        "flags": {
            "title": "Flags and damage",
            "description": "Cautions the indexer recorded: damaged archives, unsafe members, listing mismatches and "
            "secrets (never the secret itself). Blank entry: all.",
            "sql": FLAGS_SQL,
        },
        "restores": {
            "title": "Restores done",
            "description": "Conda envs unpacked and docker images loaded by `vault restore`. Blank entry: all.",
            "sql": RESTORES_SQL,
        },
        "runs": {
            "title": "Reproduction runs",
            "description": "Every `vault repro` run with its status, verdict and per-request counts. Blank entry: all.",
            "sql": RUNS_SQL,
        },
        "run": {"title": "One run", "description": "A run's verdict, provenance and summary.", "sql": RUN_SQL},
        "run_requests": {
            "title": "Per-request comparison",
            "description": "Each compared request of a run: verdict and the first output token that differs.",
            "sql": RUN_REQUESTS_SQL,
        },
    }
    return {name: {**spec, "hide_sql": True} for name, spec in queries.items()}
