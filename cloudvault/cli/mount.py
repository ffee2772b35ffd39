"""Mount the mirror read-only: plain files as they are, each archive also a folder of its members, reads verified.

Every mirror in the catalog appears under its root folder's name (with --entry, that one entry at the mount's
root). Listing and stat come from the catalog; a member's read decodes only the frames that hold it and fails
with EIO, logged, if its BLAKE3 is not the catalog's or its archive changed since indexing. An archive's own bytes
stay readable at NAME.raw (x.tar.zst.raw). Returns once the mount answers; `vault umount MOUNTPOINT` ends it.
Needs the mount extra (mfusepy) and fuse3.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, catalog_name

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
    add_output_options(parser)


def run(args) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import mount as view
    from cloudvault.mount.actions import mount_catalog

    options = _options(args)
    ui = UI(as_json=args.json)
    mount_catalog(options, foreground=args.foreground, announce=lambda mounted: ui.present(mounted, view.show))
    return errors.OK


def _options(args):
    """The catalog's path, the mount point made absolute, and the rest as given (a cache under 1 MiB refused)."""
    from pathlib import Path

    from cloudvault import config
    from cloudvault.mount.session import MountOptions

    if args.cache_mb < 1:
        raise errors.UsageError(detail="--cache-mb must be at least 1")
    mountpoint = Path(args.mountpoint).expanduser().absolute()
    return MountOptions(config.catalog_path(args.catalog), mountpoint, args.entry, args.cache_mb, args.allow_flagged,
                        args.debug)  # fmt: skip
