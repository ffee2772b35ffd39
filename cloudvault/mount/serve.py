"""The mount's serving process, a private entry point: `python -P -m cloudvault.mount.serve OPTIONS` (the options
as MountOptions writes them), started by `vault mount` and by a recipe's inputs via mount; `--foreground` serves
through serve_catalog in the command's own process. Errors are one line on stderr (the mount's log) and their exit
code, as vault's own are."""

from __future__ import annotations

import sys

from cloudvault.catalog.db import open_shared_reader
from cloudvault.catalog.query import resolve_entry
from cloudvault.errors import USAGE, VaultError
from cloudvault.io.members import PieceCache
from cloudvault.mount.frames import USUAL_FRAME, FrameCache, Sources, warm_decoder
from cloudvault.mount.fs import serve
from cloudvault.mount.session import MountOptions
from cloudvault.mount.tree import build_tree

PIECE_SHARE = 4  # verified pieces get a quarter of --cache-mb, decoded frames the rest
RSS_BEYOND_CACHE_MIB = 128  # peak RSS stays within --cache-mb and this: Python, SQLite, reads in flight
MALLOC_ARENAS = 2  # glibc's default, 8 per core, lets 16 FUSE threads keep 16 heaps of freed pieces
M_ARENA_MAX = -8  # mallopt's parameter (malloc.h)


def serve_catalog(options: MountOptions) -> None:
    """Serve the catalog's tree (or one entry's) at options.mountpoint until it is unmounted or signalled."""
    _few_malloc_arenas()
    conn = open_shared_reader(options.catalog)
    try:
        mirror_id = entry_id = None
        if options.entry:
            mirror_id, entry_id, _ = resolve_entry(conn, options.entry)
        tree = build_tree(conn, mirror_id, entry_id)
        budget = options.cache_mb << 20  # decoded frames and verified pieces together; the rest is a constant
        frames = FrameCache(budget - budget // PIECE_SHARE)
        frames.buffers.warm(USUAL_FRAME)
        warm_decoder(USUAL_FRAME)
        sources = Sources(conn, frames, tree.lock, PieceCache(budget // PIECE_SHARE))
        try:
            serve(tree, sources, options.mountpoint, allow_flagged=options.allow_flagged, debug=options.debug)
        finally:
            sources.close()
    finally:
        conn.close()


def _few_malloc_arenas() -> None:
    """Cap glibc's malloc arenas before the FUSE threads start (a peak RSS ~25 MiB lower on a 2-core machine);
    nothing where the C library is another."""
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, MALLOC_ARENAS)  # the process's own symbols: glibc's mallopt


def main(argv: list[str]) -> int:
    try:
        options = MountOptions.from_argv(argv)
    except ValueError as exc:
        sys.stderr.write(f"vault: error: usage: python -P -m cloudvault.mount.serve OPTIONS_JSON ({exc})\n")
        return USAGE
    try:
        serve_catalog(options)
    except VaultError as exc:
        sys.stderr.write(f"vault: error: {exc.message}\n")
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
