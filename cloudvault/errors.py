"""User-facing errors: each class's docstring is its message template and it carries its exit code."""

from __future__ import annotations

OK = 0
NOTHING_FOUND = 1
USAGE = 2
NOT_FOUND = 3
AMBIGUOUS = 4
INTEGRITY = 5
ENVIRONMENT = 6
REPRO_MISMATCH = 10
INTERRUPTED = 130


class VaultError(Exception):
    """{detail}"""

    exit_code = USAGE

    def __init__(self, **fields: object) -> None:
        self.fields = fields
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return (self.__doc__ or "{detail}").strip().format(**self.fields)


class UsageError(VaultError):
    """{detail}"""

    exit_code = USAGE


class EntryNotFound(VaultError):
    """no entry matches {query!r} in the catalog{hint}"""

    exit_code = NOT_FOUND


class AmbiguousEntry(VaultError):
    """{query!r} names {count} entries: {candidates}; give a longer prefix"""

    exit_code = AMBIGUOUS


class MemberNotFound(VaultError):
    """no file or member {path!r} in {entry}{hint}"""

    exit_code = NOT_FOUND


class AmbiguousMember(VaultError):
    """{path!r} matches {count} paths in {entry}: {candidates}; give more of the path or --archive"""

    exit_code = AMBIGUOUS


class MirrorNotFound(VaultError):
    """mirror {root!r} does not exist or is not a directory"""

    exit_code = NOT_FOUND


class CatalogMissing(VaultError):
    """no catalog at {path}; run `vault index MIRROR` first (or `vault demo`)"""

    exit_code = NOT_FOUND


class CatalogTooNew(VaultError):
    """catalog {path} has schema version {found}, newer than this vault ({supported}); upgrade cloudvault"""

    exit_code = ENVIRONMENT


class CatalogBusy(VaultError):
    """another `vault index` (pid {pid}) is writing {path}; wait for it or pass --wait"""

    exit_code = ENVIRONMENT


class ToolMissing(VaultError):
    """{tool} is not installed: {hint}"""

    exit_code = ENVIRONMENT


class IntegrityError(VaultError):
    """{detail}"""

    exit_code = INTEGRITY


class StaleArchive(VaultError):
    """{path} changed since it was indexed ({what}); re-index {entry} with `vault index`"""

    exit_code = INTEGRITY


class HashMismatch(VaultError):
    """BLAKE3 mismatch for {path}: expected {expected}, got {found}; nothing was written"""

    exit_code = INTEGRITY


class UnsafeMember(VaultError):
    """refusing {path!r}: {why}"""

    exit_code = INTEGRITY


class DestinationExists(VaultError):
    """{path} exists; pass --force to overwrite it"""

    exit_code = USAGE


class NoSpace(VaultError):
    """no space left writing {path}; nothing was left behind"""

    exit_code = ENVIRONMENT


class Interrupted(VaultError):
    """interrupted; everything committed before is kept, and a re-run continues from there"""

    exit_code = INTERRUPTED
