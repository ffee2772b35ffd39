"""The lab's `.tar.zst.list` files (`tar -t` or `tar -tv` output) compared with an archive's members."""

from __future__ import annotations

import re

from cloudvault.catalog import files as catalog_files
from cloudvault.catalog.db import transaction
from cloudvault.catalog.files import archive_at, member_paths
from cloudvault.index.context import MirrorContext
from cloudvault.index.plan import is_archive, listing_for
from cloudvault.models import FileStat, Flag

VERBOSE = re.compile(rb"^[-dlhcbps][rwxsStT-]{9}\S*\s+\S+\s+\d+\s+\S+\s+\S+\s+(.*)$")


def normalize(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name.rstrip("/") or "."


def parse_listing(data: bytes) -> list[str]:
    """Paths named by a listing; `tar -tv` lines lose their mode/owner/size/date columns and any ' -> target'."""
    paths = []
    for line in data.splitlines():
        if not line.strip():
            continue
        m = VERBOSE.match(line)
        if m:
            line = m.group(1)
            if line.startswith(b"/") is False and (b" -> " in line or b" link to " in line):
                line = re.split(rb" -> | link to ", line, maxsplit=1)[0]
        paths.append(normalize(line.decode("utf-8", "backslashreplace")))
    return paths


def compare_listing(listed: list[str], members: list[str]) -> tuple[list[str], list[str]]:
    """(listed but not in the archive, in the archive but not listed), each sorted."""
    a, b = set(listed), {normalize(m) for m in members}
    return sorted(a - b), sorted(b - a)


def check_listings(ctx: MirrorContext, walked: list[FileStat], read_now: set[str]) -> None:
    """Each archive with a .tar.zst.list beside it whose archive or listing was just read: do they agree?
    The flag's detail names a few paths, redacted: a listing line can hold what a member name would."""
    paths = {st.path: st for st in walked}
    for path in sorted(p for p in paths if is_archive(p)):
        listing = listing_for(path)
        found = archive_at(ctx.conn, ctx.mirror_id, path)
        if listing not in paths or not ({path, listing} & read_now) or found is None:
            continue
        archive_id, file_id = found
        try:
            with ctx.mirror.open(listing, paths[listing].raw_path) as fh:
                listed = parse_listing(fh.read())
        except OSError:
            continue
        missing, extra = compare_listing(listed, member_paths(ctx.conn, archive_id))
        with transaction(ctx.conn):
            catalog_files.clear_flags(ctx.conn, ctx.mirror_id, "list_mismatch", file_id)
            catalog_files.set_list_status(ctx.conn, archive_id, "mismatch" if missing or extra else "match")
            if missing or extra:
                detail = (
                    f"{listing.rsplit('/', 1)[-1]} lists {len(missing)} path(s) not in the archive "
                    f"(e.g. {missing[:3]}) and omits {len(extra)} member(s) (e.g. {extra[:3]})"
                )
                flag = Flag("list_mismatch", ctx.rules.redact(detail))
                catalog_files.insert_flags(ctx.conn, ctx.mirror_id, ctx.entry_for(path), file_id, [flag])
                ctx.report.count([flag])
