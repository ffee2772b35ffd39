"""Mount and unmount: `vault mount` starts the file system in a child process (the private entry point
`python -P -m cloudvault.mount.serve OPTIONS`, never the public grammar) and returns once the mount answers;
`--foreground` serves in this process (Ctrl-C unmounts); `vault umount` unmounts lazily, so a mount whose process
was killed (the folder answers "Transport endpoint is not connected") is cleared too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from cloudvault.errors import EnvironmentProblem, ToolMissing, UsageError

READY_TIMEOUT_S = 30.0
STOP_WAIT_S = 5.0  # for a child stopped before its mount answered
ENTRY_POINT = "cloudvault.mount.serve"  # the child's module (serve.py): its options are one JSON argument
DEFAULT_CACHE_MB = 256
MFUSEPY_HINT = "install the mount extra (pip install 'cloudvault[mount]', which brings mfusepy)"
FUSE3_HINT = "install Debian's fuse3 package (apt-get install fuse3), which brings libfuse3 and fusermount3"


@dataclass(frozen=True)
class MountOptions:
    """What one mount serves and how: the catalog's path, the mount point, one entry or all, the frame cache's
    budget in MiB, whether flagged members read, whether every FUSE operation is logged."""

    catalog: str
    mountpoint: Path
    entry: str | None = None
    cache_mb: int = DEFAULT_CACHE_MB
    allow_flagged: bool = False
    debug: bool = False

    def to_argv(self) -> list[str]:
        return [json.dumps({**asdict(self), "mountpoint": str(self.mountpoint)})]

    @classmethod
    def from_argv(cls, argv: list[str]) -> MountOptions:
        """ValueError unless argv is what to_argv made."""
        if len(argv) != 1:
            raise ValueError("one argument, the options as JSON")
        doc = json.loads(argv[0])
        if not isinstance(doc, dict) or not isinstance(doc.get("catalog"), str):
            raise ValueError("the options name no catalog")
        try:
            return cls(**{**doc, "mountpoint": Path(doc["mountpoint"])})
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad options: {exc}") from None


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


def start_background(options: MountOptions, log_path: Path, announce=None) -> int:
    """Serve options' mount from a detached child (the private entry point, with this Python), its log in
    log_path; its pid once the mount answers (and announce(pid) has said so). -P: a `cloudvault/` folder in the
    working directory is never imported. If it does not answer, or this process is stopped first (Ctrl-C, SIGTERM),
    the child is stopped and nothing stays mounted."""
    from cloudvault.jobthreads import held_signals

    mountpoint = options.mountpoint
    argv = [sys.executable, "-P", "-m", ENTRY_POINT, *options.to_argv()]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    child = None
    try:
        # held while it starts: a signal inside Popen would lose the child it had already started
        with held_signals(), open(log_path, "ab") as log:
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     start_new_session=True)  # fmt: skip
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
