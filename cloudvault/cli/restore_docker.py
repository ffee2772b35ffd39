"""`vault restore docker`: being built (issue in progress)."""

from __future__ import annotations

from cloudvault import errors


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    raise errors.UsageError(detail="vault restore docker is not built yet")
