"""`vault mount` attacked over real FUSE: mount points that would hide a mirror or a user's files (refused, nothing
mounted), and the signals that must end a mount cleanly (SIGTERM, SIGHUP, `timeout`), foreground and background."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import vault_subprocess
from integration.test_mount import fuse  # noqa: F401  (the fixture: fusermount3, /dev/fuse, mfusepy)

from cloudvault.mount.session import mounted

pytestmark = [pytest.mark.fuse, pytest.mark.usefixtures("fuse")]  # skips without FUSE (fails in CI)

ENDED_WITHIN_S = 5.0


def _cleared(point: Path) -> None:
    """Whatever a failing run left mounted at point is unmounted (lazily), so the next test starts clean."""
    if mounted(point):
        subprocess.run(["fusermount3", "-u", "-z", str(point)], check=False, capture_output=True)


def _pid_of(stdout: str) -> int:
    return int(stdout.split("(pid ")[1].split(",")[0])


def _wait_mounted(point: Path, child: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if child is not None and child.poll() is not None:
            raise AssertionError(f"the mount process exited {child.returncode} before the mount answered")
        if mounted(point) and os.listdir(point):
            return
        time.sleep(0.05)
    raise AssertionError(f"{point} never answered")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _mount_points(own_mirror, tmp_path) -> dict[str, Path]:
    """Empty folders inside the mirror (its root's own child, deeper, through a symlink) and a folder holding a
    user's file: every one of them a mount point vault must refuse."""
    root, _ = own_mirror
    inside = root / "014_ss20_temp0_chunk1024/data/empty_here"
    inside.mkdir()
    top = root / "mnt"
    top.mkdir()
    link = tmp_path / "link_into_mirror"
    link.symlink_to(inside)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "thesis.tex").write_text("a user's file the mount would hide\n")
    return {"mirror_root_child": top, "inside_an_entry": inside, "symlink_into_mirror": link, "not_empty": busy}


@pytest.mark.parametrize("foreground", [False, True], ids=["background", "foreground"])
def test_a_mount_point_inside_a_mirror_or_not_empty_is_refused_and_nothing_is_mounted(own_mirror, tmp_path,
                                                                                      foreground, tally):  # fmt: skip
    """Class: a mount that would hide what is already there (the mirror's own folders, which the mount reads
    from and an index would walk into; a user's files). One line, exit 2, nothing mounted, nothing touched."""
    root, db = own_mirror
    for case, point in _mount_points(own_mirror, tmp_path).items():
        tally("hostile_input")
        before = sorted(os.listdir(point))
        argv = ["--catalog", str(db), "mount", *(["--foreground"] if foreground else []), str(point)]
        try:
            done = vault_subprocess(*argv, timeout=20)
        except subprocess.TimeoutExpired:  # a foreground mount that was made serves until unmounted
            done = subprocess.CompletedProcess(argv, -1, "", "still serving after 20 s")
        finally:
            was_mounted = mounted(point)
            _cleared(point)
        tally("write_outside", int(was_mounted))
        assert not was_mounted, f"{case}: {point} was mounted"
        assert done.returncode == 2, f"{case}: exit {done.returncode}: {done.stderr}"
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr, f"{case}: {done.stderr}"
        assert ("mirror" in lines[0]) if case != "not_empty" else ("not empty" in lines[0]), f"{case}: {lines[0]}"
        assert sorted(os.listdir(point)) == before, case


def _start(catalog: Path, point: Path, foreground: bool, wrap: list[str] = ()) -> tuple[subprocess.Popen | None, int]:
    """A mount of entry 018 at point: (the foreground process, or None) and the pid serving it."""
    argv = [sys.executable, "-m", "cloudvault", "--catalog", str(catalog), "mount", "--entry", "018", str(point)]
    if foreground:
        child = subprocess.Popen([*wrap, *argv[:6], "--foreground", *argv[6:]], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)  # fmt: skip
        _wait_mounted(point, child)
        return child, child.pid
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    _wait_mounted(point)
    return None, _pid_of(done.stdout)


def _ended(point: Path, pid: int, child: subprocess.Popen | None) -> tuple[float, int | None]:
    """Seconds until point was unmounted and the serving process gone (inf if not within ENDED_WITHIN_S), and the
    foreground process's exit code."""
    start = time.monotonic()
    while time.monotonic() - start < ENDED_WITHIN_S:
        if child is not None:
            child.poll()
        if not mounted(point) and not _alive(pid):
            return time.monotonic() - start, child.wait() if child is not None else None
        time.sleep(0.05)
    return float("inf"), None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("foreground", [False, True], ids=["background", "foreground"])
def test_a_stopping_signal_unmounts_the_mount_cleanly(demo_catalog, tmp_path, sig, foreground, tally):
    """Class: a signal that asks a mount to end (`kill`, a closed terminal, a batch system's end of job) ends it as
    Ctrl-C does: unmounted within seconds, the folder empty and usable again, the process gone, exit 0."""
    point = tmp_path / "m"
    point.mkdir()
    child, pid = _start(demo_catalog, point, foreground)
    try:
        assert "data" in os.listdir(point)
        tally("kill")
        os.kill(pid, sig)
        took, code = _ended(point, pid, child)
        assert took < ENDED_WITHIN_S, f"still mounted {ENDED_WITHIN_S} s after {sig.name}"
        assert os.listdir(point) == []
        if child is not None:
            err = child.stderr.read()
            assert code == 0 and "Traceback" not in err, err
    finally:
        _cleared(point)
        if child is not None:
            child.kill()
            child.wait()
        elif _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_timeout_ends_a_foreground_mount_and_leaves_the_folder_usable(demo_catalog, tmp_path, tally):
    """`timeout 3 vault mount --foreground`: SIGTERM when the time is up, the mount gone with it (timeout's 124)."""
    point = tmp_path / "m"
    point.mkdir()
    child, pid = _start(demo_catalog, point, True, wrap=["timeout", "3"])
    try:
        tally("kill")
        code = child.wait(timeout=3 + ENDED_WITHIN_S + 5)
        assert code == 124, child.stderr.read()
        took, _ = _ended(point, pid, None)
        assert took < ENDED_WITHIN_S and os.listdir(point) == []
    finally:
        _cleared(point)
        child.kill()
        child.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_vault_mount_interrupted_before_the_mount_answers_leaves_no_mount_and_no_process(demo_catalog, tmp_path,
                                                                                         sig, tally):  # fmt: skip
    """Class: a `vault mount` stopped while it waits for its background process must not leave that process
    serving a mount nobody was told of. Signals at spread delays; where the mount answered first, it is a mount
    like any other (unmounted here)."""
    from cli.test_repro import processes_naming

    def argv(point: Path) -> list[str]:
        return [sys.executable, "-m", "cloudvault", "--catalog", str(demo_catalog), "mount", "--entry", "018",
                str(point)]  # fmt: skip

    first = tmp_path / "timed"
    first.mkdir()
    start = time.monotonic()
    subprocess.run(argv(first), capture_output=True, check=True, timeout=60)
    answered_after = time.monotonic() - start  # the delays are spread over how long a mount takes here, now
    _cleared(first)
    stopped = 0
    for n, share in enumerate([0.1, 0.25, 0.4, 0.55, 0.7, 0.85]):
        point, delay = tmp_path / f"m{n}", share * answered_after
        point.mkdir()
        parent = subprocess.Popen(argv(point), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        tally("kill")
        parent.send_signal(sig)
        try:
            out, err = parent.communicate(timeout=30)
            if parent.returncode == 0 or "mounted at" in out:  # it had answered and said so (the signal came after)
                continue
            stopped += 1
            deadline = time.monotonic() + ENDED_WITHIN_S
            while time.monotonic() < deadline and (mounted(point) or processes_naming(str(point))):
                time.sleep(0.05)
            left = processes_naming(str(point))
            tally("write_outside", len(left) + int(mounted(point)))
            what = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() for pid in left]
            assert not mounted(point) and left == [], (
                f"{sig.name} after {delay:.2f} s (exit {parent.returncode}, "
                f"{err.strip()}) left {what}, mounted: {mounted(point)}"
            )
        finally:
            _cleared(point)
            for pid in processes_naming(str(point)):
                os.kill(pid, signal.SIGKILL)
            parent.kill()
            parent.wait()
    assert stopped >= 2  # the early signals landed before the mount answered
