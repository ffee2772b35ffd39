"""What `vault mount` does, one call from the command line: check the mount point, the catalog and the entry,
then serve the mount from a child (the private entry point) or in this process (--foreground); a frozen result
(Mounted) says where and by which process. `vault umount` is session.unmount."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cloudvault.documents import Document
from cloudvault.mount.session import MountOptions


@dataclass(frozen=True)
class Mounted(Document):
    """A mount that answers: its mount point, the process serving it and that process's log, the catalog and the
    entry (None: every mirror) it serves."""

    mountpoint: str
    pid: int
    log: str
    catalog: str
    entry: str | None


def mount_catalog(options: MountOptions, *, foreground: bool = False,
                  announce: Callable[[Mounted], None] = lambda mounted: None) -> Mounted | None:  # fmt: skip
    """Mount options' catalog (or entry) read-only at options.mountpoint. In the background: the Mounted once the
    mount answers, handed to announce() first, while a signal to this process still stops the child (none is left
    mounted unsaid). With foreground: served here until unmounted or signalled; None."""
    from cloudvault import config
    from cloudvault.mount import session

    session.require_fuse()
    session.check_mount_point(options.mountpoint)
    _check_catalog(options)  # here, so a missing catalog or entry is its own one line
    if foreground:
        from cloudvault.mount.serve import serve_catalog

        serve_catalog(options)
        return None
    log_path = config.cache_dir(options.catalog) / "mount.log"

    def mounted(pid: int) -> Mounted:
        return Mounted(str(options.mountpoint), pid, str(log_path), options.catalog, options.entry)

    return mounted(session.start_background(options, log_path, lambda pid: announce(mounted(pid))))


def _check_catalog(options: MountOptions) -> None:
    """The catalog opens, the entry resolves, and the mount point is in no mirror (a mount there would hide the
    mirror's own folder, from which the mount reads, and an index of the mirror would walk into the mount)."""
    from cloudvault.catalog.db import open_catalog
    from cloudvault.catalog.mirror_guard import refuse_write_into_mirror
    from cloudvault.catalog.query import resolve_entry

    conn = open_catalog(options.catalog, readonly=True)
    try:
        refuse_write_into_mirror(conn, options.mountpoint, "a mount at")
        if options.entry:
            resolve_entry(conn, options.entry)
    finally:
        conn.close()
