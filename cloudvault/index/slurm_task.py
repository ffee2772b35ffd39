"""One task of `vault index slurm plan`: `python -m cloudvault.index.slurm_task PLAN TASK_ID`.

It never opens the catalog. Its archives are scanned into one shard on node-local scratch ($TMPDIR), with the
same code a local index's workers use; the finished shard is copied beside the catalog under a temp name and
renamed into place, so the shard folder only ever holds whole shards. A progress file there says how far it is.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

from cloudvault.atomic import atomic_path
from cloudvault.catalog import shards
from cloudvault.index.archives import scan_into
from cloudvault.index.budget import plan_budget
from cloudvault.index.secrets import SecretRules
from cloudvault.index.slurm import Layout, load_plan, task_archives, write_json


def run_task(plan_path: Path, task: int) -> Path:
    """Scan the task's archives into its shard; returns the shard's final path."""
    plan = load_plan(plan_path)
    lay = Layout(Path(plan["catalog"]))
    rules = {doc["root"]: SecretRules(doc["secrets"]) for doc in plan["roots"]}
    archives = task_archives(plan, task)
    decoders = plan_budget(None).decoders(1)  # a task's archives are read one after another, each on all cores
    scratch = Path(os.environ.get("TMPDIR") or tempfile.gettempdir())
    tmp = scratch / f"vault-shard-{plan['hash'][:12]}-{task}-{os.getpid()}.db"
    started, done_bytes = time.monotonic(), 0
    try:
        shard = shards.open_shard(str(tmp))
        try:
            for i, (root, st) in enumerate(archives):
                scan_into(shard, root, st, rules[root], decoders=decoders)
                done_bytes += st.size
                _progress(lay, plan, task, i + 1, done_bytes, time.monotonic() - started)
            shards.set_meta(shard, {"plan_hash": plan["hash"], "task": task, "archives": len(archives),
                                    "bytes": done_bytes, "seconds": round(time.monotonic() - started, 3),
                                    "host": socket.gethostname()})  # fmt: skip
            shards.finish_shard(shard, with_digests=True)
        finally:
            shard.close()
        with atomic_path(lay.shard(task), force=True) as part:  # scratch is another filesystem: copy, then rename
            shutil.copyfile(tmp, part)
    finally:
        tmp.unlink(missing_ok=True)
    return lay.shard(task)


def _progress(lay: Layout, plan: dict, task: int, archives: int, nbytes: int, seconds: float) -> None:
    doc = {"plan_hash": plan["hash"], "task": task, "archives": archives, "bytes": nbytes, "seconds": seconds}
    write_json(lay.progress(task), doc)


def _terminated(signum, frame) -> None:
    raise SystemExit(128 + signum)  # scancel sends SIGTERM: unwind, so the scratch shard is removed


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m cloudvault.index.slurm_task PLAN TASK_ID", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminated)
    started = time.monotonic()
    final = run_task(Path(argv[0]), int(argv[1]))
    print(f"task {argv[1]}: shard {final} in {time.monotonic() - started:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
