"""`vault restore env` against hostile env archives and careless targets: nothing is lost, nothing escapes.

Each test names a class of fault: a move whose target and source overlap, an env name that is not a folder name,
a target that is ROOT, `/`, a mirror or a parent of one, two envs of one name, env folders that climb out of
ROOT, and a signal landing anywhere in a restore's staging. Every refusal comes before the first write, in one
line, with its exit code; the state of the disk is read back by os.walk, not by vault.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
import zstandard

from faults.hostile import changed, mirror_state

BODY = {"conda-meta/x-1.0-0.json": b'{"name": "x", "version": "1.0", "files": []}', "bin/tool": b"#!/bin/sh\n"}


def env_archive(path: Path, folders: list[str], extra: dict[str, bytes] | None = None) -> Path:
    """A .tar.zst made by Python's tarfile holding a small env in each folder ('' for the archive's root)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for folder in folders:
            for rel, body in (BODY | (extra or {})).items():
                info = tarfile.TarInfo(f"{folder}/{rel}" if folder else rel)
                info.size, info.mode = len(body), 0o755
                tar.addfile(info, io.BytesIO(body))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(zstandard.ZstdCompressor().compress(buf.getvalue()))
    return path


@pytest.fixture
def lab(tmp_path, vault, monkeypatch):
    """lab(archives: {name: [folders]}) -> run(*args): a mirror holding those env archives, indexed, and
    `vault restore env t ARGS` against it (recipe t: entry 015, root /opt/lab)."""

    def make(archives: dict[str, list[str]]):
        mirror = tmp_path / "m"
        for name, folders in archives.items():
            env_archive(mirror / "015_envs/data" / name, folders)
        db = tmp_path / "c.db"
        vault("--catalog", str(db), "index", "-q", str(mirror))
        (tmp_path / "r/env").mkdir(parents=True, exist_ok=True)
        (tmp_path / "r/env/t.toml").write_text('entry = "015"\narchives = "data/*.tar.zst"\nroot = "/opt/lab"\n')
        monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "r"))

        def run(*args: str):
            return vault("--catalog", str(db), "restore", "env", "t", *args)

        run.mirror = mirror
        return run

    return make


def _one_line_refusal(r, code: int, *words: str) -> None:
    assert r.code == code, (r.code, r.err)
    assert r.err.count("\n") == 1 and "Traceback" not in r.err, r.err
    for word in words:
        assert word in r.err, r.err


# -- a move whose target and source overlap ----------------------------------------------------------------------
@pytest.mark.parametrize("source,target", [("A", "A/sub"), ("A/sub", "A"), ("A", "A/./sub/../sub/deeper")])
def test_a_move_whose_target_and_source_overlap_is_refused_before_anything_moves(lab, tmp_path, tally, source,
                                                                                  target):  # fmt: skip
    """Class: a move's target inside its source (copying a tree into itself, then removing the source) or its
    source inside its target (--force replacing the target removes the source first)."""
    run = lab({"env-alpha.tar.zst": [""]})
    where = tmp_path / "w"
    assert run("alpha", "--prefix", str(where / source), "--no-checks").code == 0
    before = mirror_state(where)
    tally("bad_argument")
    for force in ((), ("--force",)):
        for dry in ((), ("--dry-run",)):
            r = run("alpha", "--move", str(where / source), "--prefix", str(where / target), "--no-checks", *force,
                    *dry)  # fmt: skip
            _one_line_refusal(r, 2, "inside")
    after = mirror_state(where)
    tally("write_outside", len(changed(before, after)))
    assert changed(before, after) == []
    assert (where / source / "bin/tool").read_bytes() == BODY["bin/tool"]


# -- an env name that is not a folder name; a target that is ROOT, /, or a parent of ROOT ---------------------------
@pytest.mark.parametrize("archive,name", [("..tar.zst", "."), ("env-.tar.zst", ""), ("env-...tar.zst", ".."),
                                          ("env--rf.tar.zst", "-rf")])  # fmt: skip
def test_an_env_name_that_is_not_a_folder_name_never_replaces_root_or_its_parent(lab, tmp_path, tally, archive,
                                                                                  name):  # fmt: skip
    """Class: an env named by an archive or folder as '.', '..', '' or '-x': joined under ROOT it would name ROOT
    itself or its parent, which --force replaces with every env under it."""
    run = lab({archive: [""], "env-keep.tar.zst": [""]})
    root = tmp_path / "top/ROOT"
    (root / "envs/other").mkdir(parents=True)
    (root / "envs/other/precious").write_text("mine")
    before = mirror_state(tmp_path / "top")
    tally("hostile_input")
    listed = run("--list")
    assert listed.code == 0 and "not a usable env name" in listed.out, listed.out + listed.err
    by_name = () if name.startswith("-") else ((name, "--prefix", str(root / "x"), "--force"),)  # -rf: an option
    for args in (("--to", str(root), "--force"), ("--to", str(root)), *by_name):
        r = run(*args, "--no-checks")
        _one_line_refusal(r, 5, "not a usable env name")
    after = mirror_state(tmp_path / "top")
    tally("write_outside", len(changed(before, after)))
    assert changed(before, after) == []
    r = run("keep", "--to", str(root), "--force", "--no-checks")  # the others are restored by name, inside ROOT
    assert r.code == 0 and (root / "keep/bin/tool").is_file() and (root / "envs/other/precious").is_file(), r.err


@pytest.mark.parametrize("where", ["/", "ROOT", "ROOT/..", "ROOT/envs/.."])
def test_a_prefix_that_is_the_filesystem_root_or_holds_other_envs_is_refused(lab, tmp_path, tally, where):
    """Class: a target whose replacement (--force) removes more than one env: `/`, or a folder holding the
    envs restored under it."""
    run = lab({"env-alpha.tar.zst": [""]})
    root = tmp_path / "ROOT"
    assert run("--to", str(root), "--no-checks").code == 0
    prefix = "/" if where == "/" else str(tmp_path / where)
    before = mirror_state(tmp_path)
    tally("bad_argument")
    r = run("alpha", "--prefix", prefix, "--force", "--no-checks")
    _one_line_refusal(r, 2, "refusing")
    assert changed(before, mirror_state(tmp_path)) == []


def test_the_conda_root_of_a_tree_is_placed_at_root_but_never_replaces_it(lab, tmp_path, tally):
    """Class: the one env that belongs at ROOT itself (a conda root with envs/ inside): placed there once, never
    swapped in with --force over a ROOT that holds other envs."""
    run = lab({"miniforge3.tar.zst": ["", "envs/a"]})
    root = tmp_path / "ROOT"
    r = run("--to", str(root), "--no-checks")
    assert r.code == 0 and (root / "bin/tool").is_file() and (root / "envs/a/bin/tool").is_file(), r.err
    (root / "envs/other").mkdir()
    (root / "envs/other/precious").write_text("mine")
    before = mirror_state(tmp_path)
    tally("bad_argument")
    _one_line_refusal(run("--to", str(root), "--force", "--no-checks"), 2, "refusing", str(root))
    assert changed(before, mirror_state(tmp_path)) == []


# -- two envs of one name ---------------------------------------------------------------------------------------------
def test_two_envs_of_one_name_are_an_error_naming_both_folders_and_listed_both(lab, tmp_path, tally):
    """Class: a name that picks one of several envs without saying so (by name), or drops the others (--to)."""
    run = lab({"lab.tar.zst": ["envs/alpha", "old/envs/alpha", "envs/beta"]})
    tally("hostile_input")
    listed = run("--list", "--json")
    import json

    names = [e["name"] for e in json.loads(listed.out)["envs"]]
    assert sorted(names) == ["alpha", "alpha", "beta"], listed.out
    text = run("--list").out
    assert "envs/alpha" in text and "old/envs/alpha" in text
    for args in (("alpha", "--prefix", str(tmp_path / "p/alpha")), ("--to", str(tmp_path / "ROOT")),
                 ("alpha", "--to", str(tmp_path / "ROOT")), ("--dry-run", "--to", str(tmp_path / "ROOT"))):  # fmt: skip
        r = run(*args, "--no-checks")
        _one_line_refusal(r, 4, "lab.tar.zst:envs/alpha", "lab.tar.zst:old/envs/alpha")
    assert not (tmp_path / "p").exists() and not (tmp_path / "ROOT").exists()
    assert "restore it as lab.tar.zst:old/envs/alpha" in text
    r = run("beta", "--to", str(tmp_path / "ROOT"), "--no-checks")
    assert r.code == 0 and (tmp_path / "ROOT/envs/beta/bin/tool").is_file(), r.err
    r = run("lab.tar.zst:old/envs/alpha", "--prefix", str(tmp_path / "p/alpha"), "--no-checks")  # named by where
    assert r.code == 0 and (tmp_path / "p/alpha/bin/tool").is_file(), r.err


# -- env folders that climb out of ROOT -------------------------------------------------------------------------------
def test_env_folders_that_climb_out_of_root_are_refused_before_the_first_write(lab, tmp_path, tally):
    """Class: an env's folder in the archive ('../x', '/abs/x', 'a/../../x') that, kept under ROOT, lies outside it."""
    outside = tmp_path / "abs"
    run = lab({"esc.tar.zst": ["../x", f"{outside}/y", "a/../../z"], "env-fine.tar.zst": [""]})
    root = tmp_path / "deep/ROOT"
    before = mirror_state(tmp_path)
    tally("hostile_input", 3)
    for args in (("--to", str(root)), ("x", "--to", str(root)), ("y", "--to", str(root)), ("z", "--to", str(root)),
                 ("x", "--prefix", str(tmp_path / "p/x")), ("--dry-run", "--to", str(root))):  # fmt: skip
        r = run(*args, "--no-checks")
        _one_line_refusal(r, 5, "climbs out")
    after = {p: s for p, s in mirror_state(tmp_path).items() if not p.startswith(("c.db", "home"))}
    made = changed({p: s for p, s in before.items() if not p.startswith(("c.db", "home"))}, after)
    tally("write_outside", len(made))
    assert made == [] and not outside.exists() and not (tmp_path / "x").exists()
    r = run("fine", "--to", str(root), "--no-checks")
    assert r.code == 0 and [p.name for p in root.iterdir()] == ["fine"], r.err


# -- a target inside a mirror, or holding one -------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["prefix inside", "to inside", "prefix is the mirror", "prefix holds the mirror",
                                 "move from inside"])  # fmt: skip
def test_a_restore_target_inside_or_around_a_mirror_is_refused_and_the_mirror_untouched(lab, tmp_path, tally, how):
    """Class: a restore or move that writes into a mirror, replaces one (--force on it or on a folder holding it)
    or removes a moved env's source from inside one."""
    run = lab({"env-alpha.tar.zst": [""]})
    mirror = run.mirror
    if how == "move from inside":  # an env vault restored, later copied into the mirror (and indexed with it)
        assert run("alpha", "--prefix", str(tmp_path / "once/alpha"), "--no-checks").code == 0
        os.rename(tmp_path / "once/alpha", mirror / "015_envs/alpha")
    before = mirror_state(mirror)
    args = {
        "prefix inside": ("alpha", "--prefix", str(mirror / "015_envs/alpha")),
        "to inside": ("alpha", "--to", str(mirror / "sub")),
        "prefix is the mirror": ("alpha", "--prefix", str(mirror), "--force"),
        "prefix holds the mirror": ("alpha", "--prefix", str(tmp_path), "--force"),
        "move from inside": ("alpha", "--move", str(mirror / "015_envs/alpha"), "--prefix", str(tmp_path / "b/al")),
    }[how]
    tally("bad_argument")
    r = run(*args, "--no-checks")
    _one_line_refusal(r, 2, "mirror", str(mirror))
    tally("write_outside", len(changed(before, mirror_state(mirror))))
    assert changed(before, mirror_state(mirror)) == []
    assert not (tmp_path / "b").exists()


# -- a signal landing anywhere in a restore's staging ------------------------------------------------------------------
def staging_env(path: Path, *, big: int, files: int, frames: bool) -> Path:
    """An env archive worth interrupting: small files, files over a writer's copy limit, one over a decoded piece
    (4 MiB), random bytes (nothing to squeeze); frames: many zstd frames (decoded in parallel), else one frame with
    no content size (decoded by one thread)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        bodies = dict(BODY) | {"share/holds-prefix.txt": b"/opt/lab/envs/alpha/share\n"}
        bodies |= {f"lib/small{i}.bin": os.urandom(3000 + i) for i in range(files)}
        bodies |= {f"lib/mid{i}.bin": os.urandom((100 << 10) + i) for i in range(files // 10)}
        bodies["lib/big.bin"] = os.urandom(big)
        for rel, body in bodies.items():
            info = tarfile.TarInfo(rel)
            info.size, info.mode = len(body), 0o644
            tar.addfile(info, io.BytesIO(body))
    data = buf.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    if frames:
        step = 512 << 10
        path.write_bytes(b"".join(zstandard.ZstdCompressor().compress(data[i : i + step])
                                  for i in range(0, len(data), step)))  # fmt: skip
    else:
        path.write_bytes(zstandard.ZstdCompressor(write_content_size=False).compress(data))
    return path


@pytest.fixture
def staging_lab(tmp_path, vault, monkeypatch):
    """staging_lab(**staging_env kwargs) -> (argv after `vault`, target): an indexed mirror holding one env."""

    def make(**kw):
        staging_env(tmp_path / "m/015_envs/data/env-alpha.tar.zst", **kw)
        db = tmp_path / "c.db"
        assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
        (tmp_path / "r/env").mkdir(parents=True, exist_ok=True)
        (tmp_path / "r/env/t.toml").write_text('entry = "015"\narchives = "data/*.tar.zst"\nroot = "/opt/lab"\n')
        monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "r"))
        target = tmp_path / "out/alpha"
        return ["--catalog", str(db), "restore", "env", "t", "alpha", "--prefix", str(target), "--no-checks"], target

    return make


@pytest.mark.parametrize("frames", [True, False], ids=["frames-in-parallel", "one-frame"])
def test_the_stop_a_signal_handler_runs_never_waits_on_a_lock_its_own_thread_holds(tmp_path, tally, frames):
    """Class: a handler runs in the main thread between two bytecodes, even inside queue.get's `notify` with the
    queue's lock held. The stop it calls must only tell threads to end: waiting for a decoder that waits for that
    lock never returns (CI: a SIGINT 0.5 s into a loaded restore hung until SIGABRT). Here the main thread holds
    every lock of the stream's queues while the stop runs."""
    import contextlib
    import threading
    import time

    from cloudvault.restore.env.bulk import _Staging

    archive = staging_env(tmp_path / "env.tar.zst", big=4 << 20, files=200, frames=frames)
    run = _Staging()
    run.start(archive.open("rb").__enter__, 2)
    time.sleep(0.3)  # the decoders fill what they may hand over and wait to hand over more
    stream = run.stream
    queues = [q for q in (getattr(stream, "_jobs", None), getattr(stream, "_queue", None)) if q is not None]
    with contextlib.ExitStack() as held:
        for q in queues:
            held.enter_context(q.mutex)
        stopper = threading.Thread(target=run.stop, daemon=True)
        stopper.start()
        stopper.join(3)
        returned = not stopper.is_alive()
    tally("kill", 1)
    run.close()
    assert returned, "the handler's stop waited on a lock the interrupted thread holds"
    assert not stream._thread.is_alive()  # and close() still ended every thread


@pytest.mark.parametrize("frames", [True, False], ids=["frames-in-parallel", "one-frame"])
def test_an_interrupt_at_any_line_of_staging_ends_the_process_at_once_leaving_nothing(staging_lab, tmp_path, tally,
                                                                                      frames):  # fmt: skip
    """Class: a signal landing where a stopping producer leaves a thread waiting for good (a writer's job that
    never gets its end, an unbounded join, decoders the interpreter joins at exit): the restore is interrupted
    (errors.Interrupted, what SIGINT raises) at each distinct line the main thread runs in the writer pool, the
    env's parallel staging and the frame decoders, one child process each (and, with frames, a second SIGINT
    at each line the stopping of a child interrupted halfway runs); every child must exit with 130 within
    seconds, leaving nothing beside the target."""
    import json
    import subprocess
    import sys

    argv, target = staging_lab(big=6 << 20, files=40, frames=frames)
    report = tmp_path / "report.jsonl"
    runner = Path(__file__).with_name("interrupt_points.py")
    modules = "restore/env/bulk.py,cloudvault/jobthreads.py,archive/zstdframes.py"
    twice = ["--twice"] if frames else []  # and a second SIGINT at each line the stopping runs
    proc = subprocess.Popen([sys.executable, str(runner), str(report), "10", modules, *twice, "--", *argv])
    try:
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:  # never an orphan: the runner and the children it forked
            proc.kill()
            proc.wait()
    ended = [json.loads(line) for line in report.read_text().splitlines()]
    first, points = ended[0], ended[1:]
    assert first["code"] == 0 and first["left"] == ["alpha"], first
    tally("kill", len(points))
    bad = [e for e in points if e["hung"] or e["code"] != 130 or e["left"] or e["seconds"] > 5]
    assert bad == [], f"{len(bad)} of {len(points)}: {bad[:5]}"
    assert len(points) > 100 and (not frames or sum("second" in e for e in points) > 20)


@pytest.fixture
def cpu_load():
    """A busy loop on every core beside the test, killed (and reaped) when it ends."""
    import subprocess
    import sys

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _left_and_cleared(folder: Path) -> list[str]:
    """What a try left in folder, then removed: the next try starts clean."""
    import shutil

    left = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    for name in left:
        shutil.rmtree(folder / name)
    return left


def test_sigint_and_sigterm_at_many_moments_of_a_loaded_restore_end_it_within_seconds(staging_lab, tally, cpu_load):
    """Class: a stopping signal while threads decode, write and wait on each other, on cores the restore shares
    with busy loops: each of 16 tries (SIGINT and SIGTERM, sent from before staging to deep into it) must end the
    process within seconds with the signal's exit code and nothing beside the target; a child still running is
    killed, never left behind."""
    import signal
    import subprocess
    import sys
    import time

    argv, target = staging_lab(big=24 << 20, files=300, frames=True)
    outcomes = []
    for attempt in range(16):
        sig = (signal.SIGINT, signal.SIGTERM)[attempt % 2]
        delay = (0.0, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.8)[attempt // 2]
        proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "cloudvault", *argv],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            staging = target.with_name(f".{target.name}.vault-restore-{proc.pid}")
            while proc.poll() is None and not staging.exists() and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(delay if attempt % 4 < 2 else delay / 4)
            sent = time.monotonic()
            proc.send_signal(sig)
            try:
                err = proc.communicate(timeout=10)[1].decode()
                took = time.monotonic() - sent
            except subprocess.TimeoutExpired:  # where its threads are, then killed
                proc.send_signal(signal.SIGABRT)
                err, took = "still running 10 s after the signal: " + proc.communicate(timeout=10)[1].decode(), None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        whole = (target / "conda-meta/vault-restore.json").is_file()  # the marker: written last, before the rename
        left = _left_and_cleared(target.parent)
        outcomes.append((sig.name, delay, proc.returncode, took, left, whole, err.strip()[-3000:]))
    tally("kill", len(outcomes))
    interrupted = [o for o in outcomes if o[2] != 0]  # else it had finished first
    bad = [o for o in interrupted if o[2] != 128 + signal.Signals[o[0]] or o[3] is None or o[3] > 5
           or o[4] not in ([], ["alpha"]) or (o[4] and not o[5])]  # fmt: skip
    # nothing beside the target; at the target nothing, or the whole env (the signal came after it was placed)
    assert bad == [], "\n\n".join(f"{o[:6]}\n{o[6]}" for o in bad)  # each with its stderr: a faulthandler dump
    assert len(interrupted) >= 8, outcomes  # most tries really were interrupted
    print("seconds from the signal to the exit:", sorted(round(o[3], 2) for o in interrupted))
