"""`vault index` on a terminal: the run's summary (counts, generation, flags, what to do about damage), the
warning for a mirror indexed empty, and `--dry-run`'s budget."""

from __future__ import annotations

import shlex

from cloudvault.cli.ui import human_size


def warn_empty(ui, indexed) -> None:
    """An empty or temporary folder indexed by mistake: say how to undo it (on stderr, --json too)."""
    for name in indexed.report.empty:
        ui.warn(f"warning: mirror {name}: its root holds no files, so it was indexed with nothing in it; "
                f"if that was a mistake: vault mirrors rm {shlex.quote(name)}")  # fmt: skip


def show(ui, indexed) -> None:
    """The summary line, the generation's counts, then a line for each thing worth a look (none with --quiet)."""
    if ui.quiet:
        return
    r = indexed.report
    rate = r.bytes_read / r.seconds if r.seconds else 0
    ui.line(
        f"indexed {', '.join(r.mirrors)} into {indexed.catalog}: {r.files_seen} files seen, {r.files_read} read "
        f"({human_size(r.bytes_read)}, {human_size(int(rate))}/s), {r.files_unchanged} unchanged, "
        f"{r.files_deleted} removed; {r.archives_read} archives, {r.members_indexed} members, {r.seconds:.2f} s"
    )
    ui.line(f"  generation {r.generation}: {r.added} added, {r.modified} modified, {r.files_deleted} removed, "
            f"{r.changed_in_place} changed in place, {r.newly_damaged} newly damaged")  # fmt: skip
    for name in r.dropped:
        ui.line(f"  dropped {name}: its root is gone (--prune)")
    if r.not_opened:
        counts = ", ".join(f"{label} x{n}" for label, n in sorted(r.not_opened.items()))
        ui.line(f"  {sum(r.not_opened.values())} archives in formats vault does not open: {counts}")
    if r.encrypted_members:
        zips, members = len(r.encrypted_members), sum(r.encrypted_members.values())
        ui.line(f"  {zips} zip{'s' * (zips > 1)} with {members} encrypted member{'s' * (members > 1)} vault cannot "
                f"read: {', '.join(sorted(r.encrypted_members))}")  # fmt: skip
    if r.unread_methods:
        counts = ", ".join(f"{method} x{n}" for method, n in sorted(r.unread_methods.items()))
        members = sum(r.unread_methods.values())
        ui.line(f"  {members} zip member{'s' * (members > 1)} in methods vault does not read: {counts}")
    if r.one_block_xz:
        names = ", ".join(sorted(r.one_block_xz))
        ui.line(f"  {len(r.one_block_xz)} .tar.xz in one xz block, each member decoded from the archive's start "
                f"(`xz -T0` or `xz --block-size=16MiB` makes one seekable): {names}")  # fmt: skip
    for line in r.missing_extras:
        ui.line(f"  {line}")
    for kind, n in sorted(r.flags.items()):
        ui.line(f"  flagged: {n} {kind.replace('_', ' ')}")
    if r.still_flagged:
        ui.line(f"  {r.still_flagged} still flagged changed in place or damaged by an earlier run")
    if r.changed_in_place or r.newly_damaged or r.still_flagged:
        ui.line(f"  {r.changed_in_place} changed in place (same size and mtime, other bytes: suspected corruption), "
                f"{r.newly_damaged} newly damaged: their recorded hashes and members are kept. `vault verify` shows "
                "them; `vault index --accept PATH...` takes a file's new bytes as a new version")  # fmt: skip


def show_budget(ui, budget) -> None:
    """The local run's budget: its cores, and the memory each worker may hold, with one archive per core and
    with one archive decoded on all of them."""
    memory = human_size(budget.memory) if budget.memory is not None else "unknown"
    bound = ", bounded by memory" if budget.bounded_by_memory else ""
    ui.line(f"cores: {budget.cores} of {budget.cores_present} present{bound}; memory available {memory}")
    many, each = budget.processes(budget.cores), budget.worker_memory(budget.cores)
    ui.line(f"  {budget.cores} or more archives: {many} worker processes, each {budget.decoders(budget.cores)} "
            f"decoding thread(s) and at most {human_size(each)} ({human_size(many * each)} in all)")  # fmt: skip
    ui.line(f"  one archive left: {budget.decoders(1)} decoding threads, at most {human_size(budget.worker_memory(1))}")
