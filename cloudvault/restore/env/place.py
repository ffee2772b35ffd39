"""Where an env is built and how it lands: a staging folder beside the target, made once the checks that must pass
before anything is written have passed, filled by the caller (a restore, a move), synced, and renamed into place in
one step (a target being replaced set aside first, then removed); when anything fails, the staging folder goes.

So nothing is at the target unless all of it is, and a killed run's leftovers are vault's own: named by pid
(`.NAME.vault-restore-PID`, `.NAME.vault-replaced-PID`) and removed before the next one starts.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from cloudvault import errors
from cloudvault.atomic import fsync_dir, process_gone, sync_filesystem
from cloudvault.restore.env.source import NotEnoughSpace, PrefixUnusable

STAGING_MARK = ".vault-restore-"
REPLACED_MARK = ".vault-replaced-"


class Staging:
    """The staging folder a `placed` block fills, and how long syncing it took once the block ended."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sync_seconds = 0.0


@contextlib.contextmanager
def placed(name: str, target: Path, need: int, force: bool) -> Iterator[Staging]:
    """A staging folder beside target (need bytes free, target absent unless force) for the block to fill; when
    the block ends, every file synced and the folder renamed into place as target; when it raises (Ctrl-C too),
    the folder removed, and a full disk is NoSpace (exit 6)."""
    staging = Staging(staging_path(target))  # named by pid, so whatever is there when this fails is ours
    try:
        prepare_staging(name, target, need, force)  # inside the try: a signal right after its mkdir removes it
        yield staging
        clock = time.monotonic()
        sync_filesystem(staging.path)  # every file durable before the rename makes the env visible
        staging.sync_seconds = time.monotonic() - clock
        swap_into_place(staging.path, target, force)
    except BaseException as exc:
        discard_staging(staging.path, target, exc)
        raise


def remove_stale_staging(target: Path) -> None:
    """Staging folders (and envs set aside by --force) of a restore that was killed, its pid gone, are vault's
    own: removed before a new one starts."""
    if not target.parent.is_dir():
        return
    for mark in (STAGING_MARK, REPLACED_MARK):
        for path in target.parent.glob(f".{target.name}{mark}*"):
            pid = path.name.rsplit(mark, 1)[1]
            if pid.isdigit() and int(pid) != os.getpid() and process_gone(int(pid)):
                shutil.rmtree(path, ignore_errors=True)


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def staging_path(target: Path) -> Path:
    """Where this process stages target: beside it, named by pid (a killed run's is removed by the next)."""
    return target.parent / f".{target.name}{STAGING_MARK}{os.getpid()}"


def prepare_staging(name: str, target: Path, need: int, force: bool) -> Path:
    """The staging folder beside target, after the checks that must pass before anything is written."""
    if os.path.lexists(target) and not force:
        raise errors.DestinationExists(path=target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PrefixUnusable(path=target.parent, why=exc.strerror or str(exc)) from None
    remove_stale_staging(target)
    free = shutil.disk_usage(target.parent).free
    if free < need:
        raise NotEnoughSpace(path=target.parent, free=_gib(free), name=name, need=_gib(need))
    staging = staging_path(target)
    try:
        staging.mkdir(mode=0o700)
    except OSError as exc:
        raise PrefixUnusable(path=staging, why=exc.strerror or str(exc)) from None
    return staging


def discard_staging(staging: Path, target: Path, exc: BaseException) -> None:
    """A failed or interrupted restore leaves nothing: staging removed; a full disk becomes NoSpace (exit 6)."""
    shutil.rmtree(staging, ignore_errors=True)
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        raise errors.NoSpace(path=target) from None


def swap_into_place(staging: Path, target: Path, force: bool) -> None:
    """staging becomes target in one rename; a target being replaced (--force) is moved aside first, then removed.
    Without force, a target that appeared since the start (another restore) is theirs: DestinationExists. The two
    renames are one step to a signal (held till both are done) and to a failure (the old target put back): there
    is never a moment when neither env is at target."""
    from cloudvault.jobthreads import held_signals

    aside = None
    if os.path.lexists(target) and not force:
        raise errors.DestinationExists(path=target)
    with held_signals():
        if os.path.lexists(target):
            aside = target.with_name(f".{target.name}{REPLACED_MARK}{os.getpid()}")
            os.rename(target, aside)
        try:
            os.rename(staging, target)
        except OSError as exc:
            if aside is not None:
                os.rename(aside, target)
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):  # another restore placed it meanwhile: theirs stays
                raise errors.DestinationExists(path=target) from None
            raise
    fsync_dir(target.parent)
    if aside is not None:
        shutil.rmtree(aside) if aside.is_dir() and not aside.is_symlink() else aside.unlink()
