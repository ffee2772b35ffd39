"""Unmount a `vault mount` (lazily: open readers keep what they hold; a mount whose process died is cleared too)."""

from __future__ import annotations

from cloudvault import errors


def add_arguments(parser) -> None:
    parser.add_argument("mountpoint", help="where `vault mount` mounted the mirror")


def run(args) -> int:
    from pathlib import Path

    from cloudvault.mount.session import unmount

    unmount(Path(args.mountpoint).expanduser().absolute())
    return errors.OK
