"""User-facing errors: each class's docstring is its message template and it carries its exit code.

The classes are grouped as borg groups them: a group's exit code is inherited by every error in it, so the
exit-code table (`vault --help`, `EXIT_CODES`) is generated from this module and cannot drift from it.
"""

from __future__ import annotations

import os

OK = 0
NOTHING_FOUND = 1
USAGE = 2
NOT_FOUND = 3
AMBIGUOUS = 4
INTEGRITY = 5
ENVIRONMENT = 6
PREREQUISITE = 7  # a system tool or a Python extra is not installed: the message names what to install
REPRO_MISMATCH = 10
BUG = 70  # EX_SOFTWARE of sysexits.h: an exception no check foresaw; the traceback follows
HUNG_UP = 129  # 128 + SIGHUP, as a shell reports a process the signal ended
INTERRUPTED = 130
TERMINATED = 143  # 128 + SIGTERM

# exit code -> what it means; OK and NOTHING_FOUND are outcomes, the rest are error groups below.
EXIT_CODES = {
    OK: "ok",
    NOTHING_FOUND: "nothing found",
    USAGE: "usage (bad option, bad recipe, existing destination)",
    NOT_FOUND: "not found (entry, member, catalog, mirror, recipe)",
    AMBIGUOUS: "ambiguous (an ID prefix or path names several)",
    INTEGRITY: "integrity (hash mismatch, damaged or changed archive, unsafe member)",
    ENVIRONMENT: "environment (busy catalog, no space, unreachable mirror or daemon)",
    PREREQUISITE: "a system tool or Python extra is missing; the message names what to install",
    REPRO_MISMATCH: "a reproduction did not reproduce",
    BUG: "a bug in vault (an unexpected exception; its traceback is printed): please report it",
    HUNG_UP: "hung up (SIGHUP, the terminal closed); stopped as Ctrl-C stops",
    INTERRUPTED: "interrupted (Ctrl-C); what was committed is kept",
    TERMINATED: "terminated (SIGTERM: `timeout`, `kill`, a batch system); stopped as Ctrl-C stops",
}


def one_line(text: str) -> str:
    """text as one line: the lines of a wrapped docstring or of an outside tool's message joined by a space."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


class VaultError(Exception):
    """{detail}"""

    exit_code = USAGE
    defaults: dict = {}

    def __init_subclass__(cls, exit_code: int | None = None, **kwargs: object) -> None:
        """`class NotFound(VaultError, exit_code=NOT_FOUND)`: a group names its exit code once, in its class line;
        every error under it inherits the code."""
        super().__init_subclass__(**kwargs)
        if exit_code is not None:
            cls.exit_code = exit_code

    def __init__(self, **fields: object) -> None:
        self.fields = {**self.defaults, **fields}
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return one_line((self.__doc__ or "{detail}").format(**self.fields))


def exit_code_table() -> str:
    """One line per exit code, for `vault --help`."""
    return "\n".join(f"  {code:>3}  {what}" for code, what in EXIT_CODES.items())


# -- the groups: an error is a subclass of one and exits with its code (EXIT_CODES says what each means) -------
class UsageError(VaultError, exit_code=USAGE):
    """{detail}"""


class NotFound(VaultError, exit_code=NOT_FOUND):
    """{detail}"""


class Ambiguous(VaultError, exit_code=AMBIGUOUS):
    """{detail}"""


class IntegrityError(VaultError, exit_code=INTEGRITY):
    """{detail}"""


class EnvironmentProblem(VaultError, exit_code=ENVIRONMENT):
    """{detail}"""


class Prerequisite(EnvironmentProblem, exit_code=PREREQUISITE):
    """{detail}"""


# -- usage (2) ---------------------------------------------------------------------------------------------------
class DestinationExists(UsageError):
    """{path} exists; pass --force to overwrite it"""


class NotACatalog(UsageError):
    """{named_by} {path} is not a vault catalog ({why}); give a catalog file, or a path where `vault index` may
    create one"""

    defaults = {"named_by": "the catalog"}


class RecipeInvalid(UsageError):
    """recipe {path}: {detail}"""


# -- not found (3) -----------------------------------------------------------------------------------------------
class EntryNotFound(NotFound):
    """no entry matches {query!r} in the catalog{hint}"""


class MemberNotFound(NotFound):
    """no file or member {path!r} in {entry}{hint}"""


class MirrorNotFound(NotFound):
    """mirror {root!r} does not exist or is not a directory"""


class CatalogMissing(NotFound):
    """no catalog at {path}; run `vault index MIRROR` first (or `vault demo`)"""


class GenerationNotFound(NotFound):
    """no index generation {number} in this catalog (the last is {last}); `vault log` lists them"""


class RecipeNotFound(NotFound):
    """no {kind} recipe {name!r}{hint}"""


# -- ambiguous (4) -----------------------------------------------------------------------------------------------
class AmbiguousEntry(Ambiguous):
    """{query!r} names {count} entries: {candidates}; give a longer prefix"""


class AmbiguousMember(Ambiguous):
    """{path!r} matches {count} paths in {entry}: {candidates}; give more of the path or --archive"""


# -- integrity (5) -----------------------------------------------------------------------------------------------
class StaleArchive(IntegrityError):
    """{path} changed since it was indexed ({what}); re-index {entry} with `vault index`"""


class HashMismatch(IntegrityError):
    """BLAKE3 mismatch for {path}: expected {expected}, got {found}; nothing was written"""


class PieceMismatch(IntegrityError):
    """{path}: the {size} bytes at offset {offset} do not match the catalog's piece hash (changed or damaged since
    it was indexed); only the bytes before offset {offset} verified and were handed out"""


class NoPieceHashes(IntegrityError):
    """{path} was indexed without piece hashes, so its bytes cannot be checked piece by piece; run `vault index`
    to record them"""


class UnsafeMember(IntegrityError):
    """refusing {path!r}: {why}"""


class CatalogDamaged(IntegrityError):
    """catalog {path} is damaged ({detail}); restore it from a copy, or move it aside and rebuild it with
    `vault index`"""


class ChangedSinceRecorded(IntegrityError):
    """refusing {path}: {why}"""


class CorruptArchive(IntegrityError):
    """{path}: {detail}"""


# -- environment (6) ---------------------------------------------------------------------------------------------
class CatalogTooNew(EnvironmentProblem):
    """catalog {path} has schema version {found}, newer than this vault ({supported}); upgrade cloudvault"""


class CatalogTooOld(EnvironmentProblem):
    """catalog {path} has schema version {found}, older than this vault ({supported}), and migrating it needs write
    access: run `vault index` where the catalog can be written"""


class CatalogBusy(EnvironmentProblem):
    """another `vault index` (pid {pid}) is writing {path}; {then}"""

    defaults = {"then": "wait for it or pass --wait"}


class CatalogLocked(EnvironmentProblem):
    """catalog {path} is locked by another vault writing it ({detail}); retry when that one ends"""


class CatalogUnusable(EnvironmentProblem):
    """catalog {path}: {detail}"""


class PermissionRefused(EnvironmentProblem):
    """permission denied: {path}; check who owns it and its mode"""


class PathMissing(EnvironmentProblem):
    """no such file or folder: {path}"""


class MirrorDefinitionInvalid(UsageError):
    """mirror definition {path}: {detail}"""


class SystemRefused(EnvironmentProblem):
    """{detail}{where}"""

    defaults = {"where": ""}


class ToolMissing(Prerequisite):
    """{tool} is not installed: {hint}"""


class SystemToolMissing(ToolMissing):
    """{tool} is not installed (needed {why}); install it: apt-get install {package} (or your system's package)"""


class ExtraMissing(ToolMissing):
    """{tool} is not installed (needed {why}); install it: pip install 'cloudvault[{extra}]'"""


def require_tool(tool: str, package: str, why: str) -> None:
    """Raise SystemToolMissing unless tool is on PATH: called before a command starts any work."""
    import shutil

    if shutil.which(tool) is None:
        raise SystemToolMissing(tool=tool, package=package, why=why)


class NoSpace(EnvironmentProblem):
    """no space left writing {path}; that file was removed{kept}"""

    defaults = {"kept": ""}


class DiskFull(EnvironmentProblem):
    """no space left on the device holding {path}; free some space and run it again"""


class MirrorUnreachable(EnvironmentProblem):
    """cannot reach mirror {url}: {detail}"""


# -- interrupted (130) -------------------------------------------------------------------------------------------
class Interrupted(VaultError, exit_code=INTERRUPTED):
    """interrupted; what was finished is kept, nothing half-written was left behind"""


class Signalled(Interrupted):
    """{signal}: stopped; what was finished is kept, nothing half-written was left behind"""

    def __init__(self, signum: int) -> None:
        self.exit_code = 128 + signum  # 143 for SIGTERM, 129 for SIGHUP
        super().__init__(signal={1: "hung up (SIGHUP)", 15: "terminated (SIGTERM)"}.get(signum, f"signal {signum}"))


_DAMAGED = {"SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_FORMAT"}
_LOCKED = {"SQLITE_BUSY", "SQLITE_LOCKED"}


def from_sqlite(exc: Exception, path: object) -> VaultError:
    """The user-facing error for a sqlite3 error on the catalog at path, by its kind (sqlite_errorname): locked
    (another vault writes it) is not damage, nor is a full disk or a refused permission. An error SQLite did not
    raise (vault's own 'not a vault catalog') means the file is not a catalog."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    detail = one_line(str(exc))
    if name.startswith(tuple(_LOCKED)):
        return CatalogLocked(path=path, detail=detail)
    if name == "SQLITE_FULL":
        return DiskFull(path=path)
    if name.startswith(("SQLITE_READONLY", "SQLITE_PERM", "SQLITE_CANTOPEN", "SQLITE_AUTH", "SQLITE_IOERR")):
        return CatalogUnusable(path=path, detail=f"{detail}; check the file, its folder and the disk")
    return CatalogDamaged(path=path, detail=detail)


def from_os_error(exc: OSError) -> VaultError:
    """The user-facing error for an OSError no check foresaw, by errno: a full disk, a refused permission and a
    vanished path each say so; the rest name the system's words and the file."""
    import errno

    path = os.fsdecode(exc.filename) if exc.filename is not None else None
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(path=path or "vault's files")
    if exc.errno in (errno.EACCES, errno.EPERM) and path:
        return PermissionRefused(path=path)
    if exc.errno == errno.ENOENT and path:
        return PathMissing(path=path)
    return SystemRefused(detail=one_line(exc.strerror or str(exc)), where=f": {path}" if path else "")


def as_interrupted(exc: BaseException) -> Interrupted:
    """What a Ctrl-C (KeyboardInterrupt) or a stopping signal ends a command in, once its children are stopped:
    the signal's own error (its exit code: 130, 143, 129)."""
    return exc if isinstance(exc, Interrupted) else Interrupted()
