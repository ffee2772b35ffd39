"""The merge job of `vault index slurm plan`: `python -P -m cloudvault.index.slurm_merge CATALOG`.

A private entry point, as slurm_task is: the job script names this module and the catalog, never vault's public
grammar, so a queued merge job runs whatever a later vault calls its options. It waits for any other writer of the
catalog, then merges the plan's shards (index/merge.py); `vault index slurm merge` by hand does the same.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from cloudvault import errors
from cloudvault.index.slurm_results import Merged

USAGE = "usage: python -P -m cloudvault.index.slurm_merge CATALOG"


def merge_plan(catalog: Path, *, wait: bool, progress=None) -> Merged:
    """The catalog's Slurm plan merged (waiting for another writer when wait): what `vault index slurm merge` and the
    merge job both do."""
    from cloudvault.index.merge import merge

    report, info = merge(catalog, wait=wait, progress=progress)
    return Merged(str(catalog), info, report)


def run_merge(catalog: Path) -> tuple[str, int]:
    """The plan merged into catalog (waiting for another writer): a line for the job's log, and the exit code."""
    done = merge_plan(catalog, wait=True)
    info, report = done.info, done.report
    if done.already:
        return f"plan {info['plan'][:12]} was merged at {info['at']}: nothing to do", errors.OK
    line = (f"merged plan {info['plan'][:12]} into {catalog}: {info['from_shards']} archives from "
            f"{info['shards']} shards; {report.files_seen} files seen, {report.members_indexed} members, "
            f"{report.seconds:.2f} s")  # fmt: skip
    return line, errors.INTEGRITY if done.damaged else errors.OK


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(USAGE, file=sys.stderr)
        return errors.USAGE
    catalog = Path(argv[0])
    try:
        line, code = run_merge(catalog)
    except sqlite3.Error as exc:
        return _failed(errors.from_sqlite(exc, catalog))
    except OSError as exc:
        return _failed(errors.from_os_error(exc))
    except errors.VaultError as exc:
        return _failed(exc)
    print(line, flush=True)
    return code


def _failed(exc: errors.VaultError) -> int:
    print(f"vault: error: {exc.message}", file=sys.stderr, flush=True)
    return exc.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
