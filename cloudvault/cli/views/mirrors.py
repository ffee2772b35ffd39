"""`vault mirrors` on a terminal: a table of the mirrors known; for `rm`, what removing one loses and what was done."""

from __future__ import annotations


def show(ui, known) -> None:
    """NAME, counts, when last indexed, present or missing, root; a mirror of another catalog names it."""
    if not known.mirrors:
        ui.line("no mirrors known; index one: vault index /path/to/mirror")
        return

    def count(n: int | None) -> str:
        return "-" if n is None else str(n)

    width = max(len("NAME"), *(len(k.name) for k in known.mirrors))
    ui.line(f"{'NAME':<{width}}  {'ENTRIES':>7}  {'FILES':>7}  {'MEMBERS':>9}  {'LAST INDEXED':<25}  STATE    ROOT")
    for k in known.mirrors:
        state = {True: "present", False: "missing", None: "remote"}[k.present]
        held = k.holds
        entries, files, members = (None, None, None) if held is None else (held.entries, held.files, held.members)
        other = "" if k.in_active_catalog else f"  (catalog {k.catalog})"
        ui.line(
            f"{k.name:<{width}}  {count(entries):>7}  {count(files):>7}  "
            f"{count(members):>9}  {k.indexed_at or '-':<25}  {state:<7}  {k.root}{other}"
        )


def what_goes(targets, catalog: str) -> str:
    """What removing the mirror loses, in one line (said before it is removed, or in the refusal)."""
    k = targets[0]
    if not k.in_active_catalog:
        return (f"mirror {k.name} ({k.root}) is only in the registry (its catalog {k.catalog} no longer holds "
                "it): forgetting it lets vault write there again")  # fmt: skip
    holds = k.holds
    kept = f"{holds.runs} run{'s' * (holds.runs != 1)} and {holds.restores} restore{'s' * (holds.restores != 1)}"
    return (f"mirror {k.name} ({k.root}) in catalog {catalog}: removing it loses {holds.lost()} "
            f"({kept} recorded against it are kept)")  # fmt: skip


def going(ui, what: str) -> None:
    """With --yes: what goes, said before it goes."""
    ui.line(what)


def show_removed(ui, removed) -> None:
    done = removed.mirror
    where = "catalog " + removed.active if removed.lost else "the registry"
    ui.line(f"removed mirror {done.name} from {where}; its files at {done.root} are untouched")
