"""Mount and unmount: `vault mount` starts the file system in a child process and returns once the mount answers;
`--foreground` serves in this process (Ctrl-C unmounts); `vault umount` unmounts lazily, so a mount whose process
was killed (the folder answers "Transport endpoint is not connected") is cleared too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from cloudvault.errors import EnvironmentProblem, ToolMissing, UsageError

READY_TIMEOUT_S = 30.0
STOP_WAIT_S = 5.0  # for a child stopped before its mount answered
MAX_THREADS = 16
KERNEL_CACHE_S = 3600  # the tree and its bytes never change while mounted: the kernel may keep what it was told
LOOP_ENDED_BY_SIGNAL = 8  # fuse_main's return when its loop was ended (by a signal the handlers caught)
MFUSEPY_HINT = "install the mount extra (pip install 'cloudvault[mount]', which brings mfusepy)"
FUSE3_HINT = "install Debian's fuse3 package (apt-get install fuse3), which brings libfuse3 and fusermount3"


class MountFailed(EnvironmentProblem):
    """cannot mount {path}: {detail}"""


class NotMounted(UsageError):
    """{path} is not a mount point"""


class MountPointNotEmpty(UsageError):
    """mount point {path} is not empty (it holds {first}): a mount would hide what is there; use an empty folder"""


def import_mfusepy():
    """mfusepy, or ToolMissing naming what to install (the binding, or libfuse itself)."""
    try:
        import mfusepy
    except ImportError:
        raise ToolMissing(tool="mfusepy", hint=MFUSEPY_HINT) from None
    except OSError:  # mfusepy found no libfuse on this machine
        raise ToolMissing(tool="libfuse3", hint=FUSE3_HINT) from None
    return mfusepy


def require_fuse() -> str:
    """fusermount3's path once the binding, libfuse and /dev/fuse are all there."""
    import_mfusepy()
    tool = shutil.which("fusermount3")
    if tool is None:
        raise ToolMissing(tool="fusermount3", hint=FUSE3_HINT)
    if not os.path.exists("/dev/fuse"):
        raise ToolMissing(tool="/dev/fuse", hint="this machine (or container) has no FUSE device; load the fuse module")
    return tool


def mounted(path: str | os.PathLike) -> bool:
    """Whether path is a mount point in /proc/self/mountinfo (a dead FUSE mount still is; os.path.ismount says no)."""
    want = os.path.realpath(os.path.abspath(path))
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
            points = [_unescape(line.split()[4]) for line in fh]
    except OSError:
        return os.path.ismount(want)
    return want in points


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in octal (\\040)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def check_mount_point(path: Path) -> None:
    """UsageError unless path is an existing, empty folder that nothing is mounted on (a mount hides what the
    folder holds; the mirror's own folders are the mirror guard's to refuse)."""
    if mounted(path):
        raise UsageError(detail=f"{path} is already a mount point; `vault umount {path}` first")
    if not path.is_dir():
        raise UsageError(detail=f"mount point {path} is not a folder (make it first: mkdir -p {path})")
    with os.scandir(path) as entries:
        first = next(entries, None)
    if first is not None:
        raise MountPointNotEmpty(path=path, first=first.name)


def serve(tree, sources, mountpoint: Path, *, allow_flagged: bool = False, debug: bool = False) -> None:
    """Serve the tree at mountpoint until it is unmounted, or a stopping signal (SIGINT, SIGTERM, SIGHUP) ends
    the loop: libfuse then unmounts, and serve returns."""
    mfusepy = import_mfusepy()
    from cloudvault.mount.fs import VaultFS, make_operations

    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("fuse").setLevel(logging.DEBUG if debug else logging.CRITICAL)  # mfusepy's own errno chatter
    ops = make_operations(VaultFS(tree, sources, allow_flagged=allow_flagged))
    try:
        caches = {"kernel_cache": True, "attr_timeout": KERNEL_CACHE_S, "entry_timeout": KERNEL_CACHE_S,
                  "negative_timeout": KERNEL_CACHE_S}  # fmt: skip
        with stopping_signals_to_libfuse():
            mfusepy.FUSE(ops, str(mountpoint), foreground=True, ro=True, nothreads=False, fsname="cloudvault",
                         subtype="vault", debug=debug, max_threads=MAX_THREADS, **caches)  # fmt: skip
    except RuntimeError as exc:
        if str(exc) == str(LOOP_ENDED_BY_SIGNAL) and not mounted(mountpoint):
            return  # a stopping signal: libfuse unmounted and reports the signal as its loop's end
        raise MountFailed(path=mountpoint, detail=f"libfuse said {exc}") from None


@contextlib.contextmanager
def stopping_signals_to_libfuse():
    """SIGTERM and SIGHUP left to libfuse while it serves, as mfusepy leaves SIGINT: libfuse installs its own
    handlers (which end its loop and unmount) only over the default action. vault's Python handlers would never
    run: libfuse holds the main thread, and Python runs a handler only there, between bytecodes."""
    previous = {sig: signal.signal(sig, signal.SIG_DFL) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def start_background(argv: list[str], mountpoint: Path, log_path: Path, announce=None) -> int:
    """Run `vault ... mount --foreground` detached, its log in log_path; its pid once the mount answers (and
    announce(pid) has said so). The child is the installed vault (-P: a `cloudvault/` folder in the working
    directory is never imported). If it does not answer, or this process is stopped first (Ctrl-C, SIGTERM), the
    child is stopped and nothing stays mounted."""
    from cloudvault.jobthreads import held_signals

    log_path.parent.mkdir(parents=True, exist_ok=True)
    child = None
    try:
        # held while it starts: a signal inside Popen would lose the child it had already started
        with held_signals(), open(log_path, "ab") as log:
            child = subprocess.Popen([sys.executable, "-P", "-m", "cloudvault", *argv], stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=log, start_new_session=True)  # fmt: skip
        if _answered(child, mountpoint, log_path):
            if announce is not None:
                announce(child.pid)
            return child.pid
        raise MountFailed(path=mountpoint, detail=f"no answer in {READY_TIMEOUT_S:.0f} s; see {log_path}")
    except BaseException:
        if child is not None:
            _stop_child(child, mountpoint)
        raise


def _answered(child: subprocess.Popen, mountpoint: Path, log_path: Path) -> bool:
    """Whether the mount answered within READY_TIMEOUT_S; MountFailed (its log's last line) if the child ended."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            detail = _last_line(log_path) or f"the mount process exited {child.returncode}"
            raise MountFailed(path=mountpoint, detail=detail)
        if mounted(mountpoint):
            with contextlib.suppress(OSError):
                os.stat(mountpoint)
                return True
        time.sleep(0.02)
    return False


def _stop_child(child: subprocess.Popen, mountpoint: Path) -> None:
    """SIGTERM (libfuse unmounts, or the child stops before mounting), SIGKILL if it lingers, then a lazy unmount
    of whatever a killed child left."""
    child.terminate()
    try:
        child.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    if mounted(mountpoint):
        with contextlib.suppress(MountFailed, ToolMissing, NotMounted):
            unmount(mountpoint)


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].removeprefix("vault: error: ") if lines else ""


def unmount(mountpoint: Path) -> None:
    """Lazy unmount (fusermount3 -u -z): open readers keep what they have; a dead mount is cleared."""
    if not mounted(mountpoint):
        raise NotMounted(path=mountpoint)
    tool = shutil.which("fusermount3")
    if tool is None:
        raise ToolMissing(tool="fusermount3", hint=FUSE3_HINT)
    done = subprocess.run([tool, "-u", "-z", str(mountpoint)], capture_output=True, text=True)
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or [f"fusermount3 exited {done.returncode}"])[-1]
        raise MountFailed(path=mountpoint, detail=detail)
