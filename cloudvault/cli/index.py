"""Walk mirrors: every file and every member of every archive, into the catalog. Re-runs are incremental.

Archives are known by their bytes: .tar.zst, .tar.gz, .tar.bz2, .tar.xz, .tar, .zip, .whl, .jar and .conda, and
one archive inside another (one level).

MIRROR is a local path or an fsspec URL (ssh://host/path, s3://bucket/path). With none, the catalog's known
mirrors are re-indexed. Exit 0 when nothing was flagged as damaged, 5 when an archive or file was (truncated,
corrupt, unreadable, changed while read, unsafe member paths, listing mismatch), 6 when a known mirror root
vanished, is empty or lost over half its files (unmounted?) and --prune was not given; with --prune a root
that is gone is dropped from the catalog (as `vault mirrors rm` does). Indexing a folder with no files warns.
Secrets found are flagged, never stored. With --quiet, no summary either.

Across a Slurm cluster, `slurm` as the first word after `index` is a sub-verb (`vault index slurm --help`):
`vault index slurm plan --tasks N [MIRROR ...]` submits a job array of N tasks and a merge job (--dry-run: the
plan only); `slurm status`, `slurm resume` and `slurm merge` follow it, resubmit the tasks without a good shard,
and merge by hand. A mirror folder named slurm is given as ./slurm. The old spellings (--slurm N, --status,
--resume, --merge) still work in this release, with a note.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, bounded_int

MAX_WORKERS = 256
positive_int = bounded_int(1, MAX_WORKERS, f"worker count (1 to {MAX_WORKERS})")  # each holds an archive's buffers


def add_arguments(parser) -> None:
    import argparse  # imported by the grammar already

    parser.add_argument("mirrors", nargs="*", metavar="MIRROR", help="mirror roots; none: the known ones")
    parser.add_argument("--mirror", dest="definition", help="a mirror definition TOML or a built-in name")
    parser.add_argument(
        "--workers", type=positive_int, help="cores to index on (default: the cores present, as memory allows)"
    )
    parser.add_argument("--wait", action="store_true", help="wait for another indexer on this catalog to finish")
    parser.add_argument("--optimize", action="store_true", help="also write seekable copies, in the same pass")
    parser.add_argument(
        "--prune", action="store_true", help="a root that vanished, emptied or lost over half its files: drop them"
    )
    parser.add_argument("--accept", nargs="+", default=[], metavar="PATH",
                        help="files changed in place (same size and mtime, other bytes): take their new bytes as a "
                        "new version instead of keeping the recorded hash")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="print the cores and memory a run here would use")
    # the old spellings of `vault index slurm plan|status|resume|merge`: one more release, not in --help
    hidden = argparse.SUPPRESS
    parser.add_argument("--slurm", type=positive_int, help=hidden)
    parser.add_argument("--partition", help=hidden)
    parser.add_argument("--fs-gbps", type=float, help=hidden)
    for mode in ("--status", "--resume", "--merge"):
        parser.add_argument(mode, action="store_true", help=hidden)
    add_output_options(parser, quiet=True)


def run(args) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import index as view
    from cloudvault.index.local import index_catalog, local_budget

    request = _request(args)
    if args.slurm or args.status or args.resume or args.merge:
        from cloudvault.cli.index_slurm import old_spelling

        return old_spelling(args)
    ui = UI(as_json=args.json, quiet=args.quiet)
    if args.dry_run:
        ui.present(local_budget(request), view.show_budget)
        return errors.OK
    indexed = index_catalog(request, progress=ui.progress())
    view.warn_empty(ui, indexed)
    ui.present(indexed, view.show)
    return errors.INTEGRITY if indexed.damaged else errors.OK


def _request(args):
    """What was asked, the mirror paths checked once."""
    from cloudvault.index.local import LocalIndex

    if any(not m.strip() for m in args.mirrors):
        raise errors.UsageError(detail="an empty mirror path was given")
    if "slurm" in args.mirrors:  # the sub-verb's word, never a mirror: no run means the one or the other by chance
        raise errors.UsageError(detail="`slurm` is the sub-verb of `vault index slurm plan|status|resume|merge`, "
                                "first after `index`; give a mirror folder named slurm as ./slurm")  # fmt: skip
    return LocalIndex(args.catalog, tuple(args.mirrors), args.definition, args.workers, args.wait, args.optimize,
                      args.prune, tuple(args.accept))  # fmt: skip
