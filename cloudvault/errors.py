"""User-facing errors: each class's docstring is its message template and it carries its exit code.

The classes are grouped as borg groups them: a group's exit code is inherited by every error in it, so the
exit-code table (`vault --help`, `EXIT_CODES`) is generated from this module and cannot drift from it.
"""

from __future__ import annotations

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


class VaultError(Exception):
    """{detail}"""

    exit_code = USAGE
    defaults: dict = {}

    def __init__(self, **fields: object) -> None:
        self.fields = {**self.defaults, **fields}
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return (self.__doc__ or "{detail}").strip().format(**self.fields)


def exit_code_table() -> str:
    """One line per exit code, for `vault --help`."""
    return "\n".join(f"  {code:>3}  {what}" for code, what in EXIT_CODES.items())


# -- usage (2) ---------------------------------------------------------------------------------------------------
class UsageError(VaultError):
    """{detail}"""

    exit_code = USAGE


class DestinationExists(UsageError):
    """{path} exists; pass --force to overwrite it"""


class RecipeInvalid(UsageError):
    """recipe {path}: {detail}"""


# -- not found (3) -----------------------------------------------------------------------------------------------
class NotFound(VaultError):
    """{detail}"""

    exit_code = NOT_FOUND


class EntryNotFound(NotFound):
    """no entry matches {query!r} in the catalog{hint}"""


class MemberNotFound(NotFound):
    """no file or member {path!r} in {entry}{hint}"""


class MirrorNotFound(NotFound):
    """mirror {root!r} does not exist or is not a directory"""


class CatalogMissing(NotFound):
    """no catalog at {path}; run `vault index MIRROR` first (or `vault demo`)"""


class RecipeNotFound(NotFound):
    """no {kind} recipe {name!r}{hint}"""


# -- ambiguous (4) -----------------------------------------------------------------------------------------------
class Ambiguous(VaultError):
    """{detail}"""

    exit_code = AMBIGUOUS


class AmbiguousEntry(Ambiguous):
    """{query!r} names {count} entries: {candidates}; give a longer prefix"""


class AmbiguousMember(Ambiguous):
    """{path!r} matches {count} paths in {entry}: {candidates}; give more of the path or --archive"""


# -- integrity (5) -----------------------------------------------------------------------------------------------
class IntegrityError(VaultError):
    """{detail}"""

    exit_code = INTEGRITY


class StaleArchive(IntegrityError):
    """{path} changed since it was indexed ({what}); re-index {entry} with `vault index`"""


class HashMismatch(IntegrityError):
    """BLAKE3 mismatch for {path}: expected {expected}, got {found}; nothing was written"""


class UnsafeMember(IntegrityError):
    """refusing {path!r}: {why}"""


class CatalogDamaged(IntegrityError):
    """catalog {path} cannot be read ({detail}); restore it from a copy or rebuild it with `vault index`"""


class CorruptArchive(IntegrityError):
    """{path}: {detail}"""


# -- environment (6) ---------------------------------------------------------------------------------------------
class EnvironmentProblem(VaultError):
    """{detail}"""

    exit_code = ENVIRONMENT


class CatalogTooNew(EnvironmentProblem):
    """catalog {path} has schema version {found}, newer than this vault ({supported}); upgrade cloudvault"""


class CatalogBusy(EnvironmentProblem):
    """another `vault index` (pid {pid}) is writing {path}; wait for it or pass --wait"""


class Prerequisite(EnvironmentProblem):
    """{detail}"""

    exit_code = PREREQUISITE


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


class MirrorUnreachable(EnvironmentProblem):
    """cannot reach mirror {url}: {detail}"""


# -- interrupted (130) -------------------------------------------------------------------------------------------
class Interrupted(VaultError):
    """interrupted; what was finished is kept, nothing half-written was left behind"""

    exit_code = INTERRUPTED


class Signalled(Interrupted):
    """{signal}: stopped; what was finished is kept, nothing half-written was left behind"""

    def __init__(self, signum: int) -> None:
        self.exit_code = 128 + signum  # 143 for SIGTERM, 129 for SIGHUP
        super().__init__(signal={1: "hung up (SIGHUP)", 15: "terminated (SIGTERM)"}.get(signum, f"signal {signum}"))


def as_interrupted(exc: BaseException) -> Interrupted:
    """What a Ctrl-C (KeyboardInterrupt) or a stopping signal ends a command in, once its children are stopped:
    the signal's own error (its exit code: 130, 143, 129)."""
    return exc if isinstance(exc, Interrupted) else Interrupted()
