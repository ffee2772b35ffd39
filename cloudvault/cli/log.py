"""List the index generations: every `vault index` run, numbered and kept, with what it counted.

Each generation shows when it ran, the mirrors it indexed, and its counts: files seen and read, added, modified,
removed, changed in place (same size and mtime, other bytes: the recorded hash kept) and newly damaged archives
(their recorded members kept). Generation 0 is what a catalog held before generations were kept. `vault diff`
shows what changed between two of them.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, with_catalog


def add_arguments(parser) -> None:
    add_output_options(parser)


@with_catalog(readonly=True)
def run(args, conn) -> int:
    from cloudvault.catalog.generations import all_generations
    from cloudvault.cli.ui import UI

    ui = UI(as_json=args.json)
    found = all_generations(conn)
    if args.json:
        ui.emit({"generations": [g.to_json() for g in found]})
        return errors.OK if found else errors.NOTHING_FOUND
    for g in found:
        c = g.counts
        when = g.finished_at or f"{g.started_at} (stopped before its end)"
        ui.line(f"generation {g.number}  {when}  {', '.join(g.mirrors) or '-'}: {c['seen']} seen, {c['read']} read, "
                f"{c['added']} added, {c['modified']} modified, {c['removed']} removed, "
                f"{c['changed_in_place']} changed in place, {c['newly_damaged']} newly damaged")  # fmt: skip
    if not found:
        ui.warn("no index generations yet: `vault index MIRROR` makes the first")
    return errors.OK if found else errors.NOTHING_FOUND
