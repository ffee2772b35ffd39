"""Mount the mirror read-only: plain files as they are, each .tar.zst also a folder of its members, reads verified.

Every mirror in the catalog appears under its root folder's name (with --entry, that one entry at the mount's
root). Listing and stat come from the catalog; a member's read decodes only the frames that hold it and fails
with EIO, logged, if its BLAKE3 is not the catalog's or its archive changed since indexing. An archive's own bytes
stay readable at NAME.tar.zst.raw. Returns once the mount answers; `vault umount MOUNTPOINT` ends it.
Needs the mount extra (mfusepy) and fuse3.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import catalog_name

DEFAULT_CACHE_MB = 256  # mount.session's too; not imported from there: `vault --help` builds every parser


def add_arguments(parser) -> None:
    parser.add_argument("mountpoint", help="an existing, empty folder")
    parser.add_argument("--entry", type=catalog_name, help="mount only this entry (ID or unique prefix, e.g. 018)")
    parser.add_argument("--foreground", action="store_true", help="serve in this process; Ctrl-C unmounts")
    parser.add_argument("--cache-mb", type=int, default=DEFAULT_CACHE_MB,
                        help=f"memory for decoded frames and verified pieces, in MiB (default {DEFAULT_CACHE_MB}); "
                             "the mount's peak RSS stays within it and 128 MiB")  # fmt: skip
    parser.add_argument("--allow-flagged", action="store_true", help="let members flagged as secrets be read")
    parser.add_argument("--debug", action="store_true", help="log every FUSE operation (with --foreground)")


def run(args) -> int:
    import sys
    from pathlib import Path

    from cloudvault import config
    from cloudvault.mount import session

    if args.cache_mb < 1:
        raise errors.UsageError(detail="--cache-mb must be at least 1")
    catalog = config.catalog_path(args.catalog)
    mountpoint = Path(args.mountpoint).expanduser().absolute()
    session.require_fuse()
    session.check_mount_point(mountpoint)
    _check_catalog(catalog, args.entry, mountpoint)  # here, so a missing catalog or entry is its own one line
    options = session.MountOptions(catalog, mountpoint, args.entry, args.cache_mb, args.allow_flagged, args.debug)
    if args.foreground:
        from cloudvault.mount.serve import serve_catalog

        serve_catalog(options)
        return errors.OK
    log_path = config.cache_dir(catalog) / "mount.log"

    def announce(pid: int) -> None:  # said while a signal to this process still stops the child: none left mounted
        sys.stdout.write(f"mounted at {mountpoint} (pid {pid}, log {log_path}); `vault umount {mountpoint}` ends it\n")

    session.start_background(options, log_path, announce)
    return errors.OK


def _check_catalog(catalog: str, entry: str | None, mountpoint) -> None:
    """The catalog opens, the entry resolves, and the mount point is in no mirror (a mount there would hide the
    mirror's own folder, from which the mount reads, and an index of the mirror would walk into the mount)."""
    from cloudvault.catalog.mirror_guard import refuse_write_into_mirror
    from cloudvault.catalog.query import resolve_entry
    from cloudvault.cli.common import opened_catalog

    with opened_catalog(path=catalog, readonly=True) as conn:
        refuse_write_into_mirror(conn, mountpoint, "a mount at")
        if entry:
            resolve_entry(conn, entry)
