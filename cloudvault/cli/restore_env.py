"""`vault restore env`: being built (issue in progress)."""

from __future__ import annotations

from cloudvault import errors


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    raise errors.UsageError(detail="vault restore env is not built yet")
