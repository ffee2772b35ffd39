"""Plan and carry out one env restore: staging folder beside the target, one verified pass over the archive,
relocation, hash checks against conda-meta and pip RECORD, marker, rename into place, smoke checks, catalog row."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections import namedtuple
from pathlib import Path

from cloudvault import __version__, errors
from cloudvault.catalog.records import now, record_restore
from cloudvault.io.members import MemberReader
from cloudvault.progress import Progress
from cloudvault.restore.env import bulk as env_bulk
from cloudvault.restore.env import meta as env_meta
from cloudvault.restore.env import venv as env_venv
from cloudvault.restore.env.checks import run_checks
from cloudvault.restore.env.place import placed
from cloudvault.restore.env.results import AlreadyRestored, EnvPlan, EnvRestored, InstalledTorch, PythonUsed, Verified
from cloudvault.restore.env.rewrite import Relocation, relocate
from cloudvault.restore.env.source import (
    MARKER,
    SPACE_MARGIN,
    EnvRecipe,
    EnvSource,
    Unpatched,
    conda_meta_members,
    free_space,
    read_documents,
    read_marker,
)
from cloudvault.restore.env.stage import Staged, StagingArea, finish_dirs, stage


def plan(conn: sqlite3.Connection, recipe: EnvRecipe, env: EnvSource, target: Path,
         caps: list | None = None) -> EnvPlan:  # fmt: skip
    """What a restore would do, from the catalog and conda-meta alone: bytes, target, space, rewrites, risks
    (the recipe's pitfalls, GPUs of caps the torch build has no kernels for, a target that exists, no room)."""
    members = env.members(conn)
    need = int(sum(m.size for m in members if m.type == "file") * SPACE_MARGIN)
    conda = env_meta.conda_paths(read_documents(conn, conda_meta_members(members, env.folder)))
    old, new = env.prefix or "", str(target)
    with_prefix = {p: c for p, c in conda.items() if c.placeholder}
    misfit = sorted(p for p, c in with_prefix.items() if c.file_mode == "binary" and len(new) > len(c.placeholder))
    in_conda = set(conda)
    rel = [m.path[len(env.folder) + 1 :] if env.folder else m.path for m in members if m.type == "file"]
    pip_scripts = [p for p in rel if p.startswith("bin/") and p not in in_conda]
    pip_pyc = [p for p in rel if p.endswith(".pyc") and p not in in_conda]
    gpu = env_meta.gpu_fit(env_meta.torch_build([m.path for m in members]), None, caps)
    risks = recipe.pitfalls_for(env.name) + (list(gpu.notes) if gpu else [])
    if os.path.lexists(target):
        risks.append(f"{target} exists: it is kept unless you pass --force")
    if misfit:
        shown = ", ".join(misfit[:5])
        risks.append(f"{len(misfit)} binary file(s) recorded with a placeholder shorter than {new}: {shown}")
    free = free_space(target.parent)
    if free < need:
        risks.append(f"not enough space: {free} bytes free, {need} needed")
    return EnvPlan(
        name=env.name, archive=env.archive.path, archive_blake3=env.archive.blake3,
        archive_size=env.archive.size, bytes=need, files=len(rel), target=new, old_prefix=old,
        relocate=old != new, free=free, enough_space=free >= need, exists=os.path.lexists(target),
        conda_files=len(conda), conda_text_with_prefix=sum(c.file_mode == "text" for c in with_prefix.values()),
        conda_binary_with_prefix=sum(c.file_mode == "binary" for c in with_prefix.values()),
        binary_misfits=tuple(misfit), pip_scripts=len(pip_scripts), pip_pyc=len(pip_pyc),
        package_cache=recipe.data.get("package_cache"), checks=tuple(recipe.checks_for(env.name)),
        risks=tuple(risks),
    )  # fmt: skip


def check_recorded(root: Path, staged: Staged, conda: dict) -> Verified:
    """The archive's bytes against what conda-meta (sha256_in_prefix) and pip RECORD files say was installed."""
    out = {"conda_checked": 0, "conda_differ": [], "conda_missing": 0, "record_checked": 0, "record_differ": []}
    for rel, c in conda.items():
        want = c.sha256_in_prefix or (None if c.placeholder else c.sha256)
        got = staged.sha256.get(rel)
        if want and got is None and not os.path.islink(root / rel):
            out["conda_missing"] += 1
        elif want and got:
            out["conda_checked"] += 1
            if got != want:
                out["conda_differ"].append(rel)
    for rel in [r for r in staged.sha256 if r.endswith(".dist-info/RECORD")]:
        site = os.path.dirname(os.path.dirname(rel))
        for path, want in env_meta.record_hashes((root / rel).read_bytes(), site).items():
            if path in staged.sha256:
                out["record_checked"] += 1
                if staged.sha256[path] != want:
                    out["record_differ"].append(path)
    return Verified(out["conda_checked"], tuple(out["conda_differ"]), out["conda_missing"], out["record_checked"],
                    tuple(out["record_differ"]), staged.files)  # fmt: skip


def _write_marker(root: Path, env: EnvSource, recipe: EnvRecipe, old: str, new: str, moved: Relocation,
                  verified: Verified) -> None:  # fmt: skip
    doc = {
        "vault_version": __version__, "recipe": recipe.name, "env": env.name, "entry": env.entry_id,
        "source": env.archive.path, "source_blake3": env.archive.blake3, "original_prefix": env.prefix,
        "old_prefix": old, "prefix": new, "restored_at": now(), "rewritten": moved.rewritten,
        "unpatched": moved.unpatched, "pyc_removed": moved.pyc_removed, "pyc_recompiled": moved.pyc_recompiled,
        "pyc_moved": moved.pyc_moved, "verified": verified.to_json(),
    }  # fmt: skip
    (root / "conda-meta").mkdir(exist_ok=True)
    (root / MARKER).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


class Choices(namedtuple("Choices", "force allow_unpatched smoke python", defaults=(False, False, True, None))):
    """What the user chose for a restore or a move: replace an existing target (--force), accept files that
    could not be relocated (--allow-unpatched), run the smoke checks (not --no-checks), the python a venv runs on
    here (--python PATH, same major.minor as its own)."""

    __slots__ = ()


def restore(conn: sqlite3.Connection, recipe: EnvRecipe, env: EnvSource, target: Path, choices: Choices = Choices(),
            progress: Progress | None = None) -> EnvRestored | AlreadyRestored:  # fmt: skip
    """Restore env at target (its prefix from now on); returns what was done, recorded in the catalog (a failed
    or interrupted one too). Nothing is at target unless all of it is: the env is built in a staging folder
    beside target and renamed into place at the end."""
    return recorded(conn, env, target, lambda: _restore(conn, recipe, env, target, choices, progress))


def recorded(conn: sqlite3.Connection, env: EnvSource, target: Path, work):
    """work() run and its outcome recorded as one restores row: ok (placed), interrupted (Ctrl-C, a signal) or
    failed (any other error but a target that was already there, which is not a restore)."""
    started = now()
    try:
        result = work()
    except errors.DestinationExists:
        raise
    except errors.VaultError as exc:
        status = "interrupted" if isinstance(exc, errors.Interrupted) else "failed"
        record(conn, env, target, None, {"error": exc.message, "exit_code": exc.exit_code}, status, started)
        raise
    except KeyboardInterrupt:
        record(conn, env, target, None, {"error": errors.Interrupted().message}, "interrupted", started)
        raise
    except OSError as exc:
        record(conn, env, target, None, {"error": f"{exc.strerror or exc}"}, "failed", started)
        raise
    if not isinstance(result, AlreadyRestored):
        record(conn, env, target, result, None, "ok", started)
    return result


def _restore(conn: sqlite3.Connection, recipe: EnvRecipe, env: EnvSource, target: Path, choices: Choices,
             progress: Progress | None) -> EnvRestored | AlreadyRestored:  # fmt: skip
    progress = progress or Progress()
    if env.prefix is None:
        why = f"the recipe records no original prefix for {env.name}: add envs.{env.name}.prefix"
        raise errors.UsageError(detail=why)
    old, new = env.prefix, str(target)
    marker = read_marker(target) if os.path.isdir(target) and not choices.force else None  # --force: replaced
    same = marker and marker.get("source_blake3") == env.archive.blake3 and marker.get("prefix") == new
    if same and not choices.force:
        return AlreadyRestored(env.name, new, env.archive.path)
    members = env.members(conn)
    venv = env_venv.read_venv(members, env.folder)
    if choices.python and venv is None:
        raise errors.UsageError(detail=f"--python is for venvs; {env.name} has no pyvenv.cfg")
    interpreter = env_venv.choose_interpreter(env.name, venv, choices.python) if venv else None
    need = int(sum(m.size for m in members if m.type == "file") * SPACE_MARGIN)
    try:
        with placed(env.name, target, need, choices.force) as placing:
            staging = placing.path
            progress.start(need, sum(m.type == "file" for m in members))
            area = StagingArea(staging, env.folder, old, new, venv, interpreter)
            clock = time.monotonic()
            if env_bulk.can_stage_in_parallel(members):
                staged = env_bulk.stage_parallel(conn, members, area, progress)
            else:
                with MemberReader(conn, on_data=progress.advance) as reader:
                    staged = stage(reader, members, area, progress)
            seconds = {"stage": time.monotonic() - clock}
            if venv and interpreter:
                env_venv.load_config(venv, staging)
                env_venv.check_version(env.name, venv, interpreter)  # the version_info pyvenv.cfg records
                env_venv.retarget_config(staging, interpreter)  # --python: pyvenv.cfg names the new interpreter
            progress.current("checking conda-meta and pip RECORD hashes")
            conda = env_meta.conda_paths(conda_documents(staging))
            verified = check_recorded(staging, staged, conda)
            seconds["verify"] = time.monotonic() - clock - seconds["stage"]
            progress.current(f"moving {len(staged.holding_prefix)} files to the new prefix, moving byte-code")
            moved = relocate(staging, staged.holding_prefix, old, new, conda) if old != new else Relocation()
            seconds["relocate"] = time.monotonic() - clock - sum(seconds.values())
            if moved.unpatched and not choices.allow_unpatched:
                files = ", ".join(f"{u['path']} ({u['why']})" for u in moved.unpatched[:5])
                raise Unpatched(count=len(moved.unpatched), name=env.name, prefix=new, files=files)
            _write_marker(staging, env, recipe, old, new, moved, verified)
            finish_dirs(staging, staged)
        seconds["sync"] = placing.sync_seconds
    finally:
        progress.finish()
    checks = run_checks(target, recipe.checks_for(env.name)) if choices.smoke else []
    return EnvRestored(
        name=env.name, status="ok", target=new, old_prefix=old, archive=env.archive.path,
        archive_blake3=env.archive.blake3, files=staged.files, links=staged.links, bytes=staged.bytes,
        rewritten=len(moved.rewritten), rewritten_how=_count_how(moved.rewritten),
        unpatched=tuple(moved.unpatched),
        pyc_removed=moved.pyc_removed, pyc_recompiled=moved.pyc_recompiled,
        pyc_moved=moved.pyc_moved, pyc_note=moved.pyc_note,
        verified=verified, checks=tuple(checks), gpu=installed_gpu_fit(target),
        pitfalls=tuple(recipe.pitfalls_for(env.name)), python=_python_said(interpreter),
        seconds={k: round(v, 3) for k, v in seconds.items()},
    )  # fmt: skip


def _python_said(interpreter) -> PythonUsed | None:
    if interpreter is None:
        return None
    return PythonUsed(base=interpreter.new or interpreter.old, version=interpreter.version,
                      replaced=interpreter.old if interpreter.new else None)  # fmt: skip


def conda_documents(root: Path) -> dict[str, bytes]:
    meta = root / "conda-meta"
    return {p.name: p.read_bytes() for p in sorted(meta.glob("*.json")) if p.name != "vault-restore.json"}


def _count_how(rewritten: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rewritten:
        out[r["how"]] = out.get(r["how"], 0) + 1
    return out


def installed_gpu_fit(prefix: Path) -> InstalledTorch | None:
    """The restored env's torch build from torch/version.py; its arch list read from libtorch_cuda.so's fat
    binaries (else cuobjdump's listing, else inferred from the CUDA version)."""
    from cloudvault.restore.env.source import local_caps
    from cloudvault.tools import cuda

    found = sorted(prefix.glob("lib/python*/site-packages/torch/version.py"))
    if not found:
        return None
    torch = env_meta.torch_version_file(found[-1].read_text(errors="replace"))
    lib = found[-1].parent / "lib" / "libtorch_cuda.so"
    found = cuda.library_arch_list(str(lib)) if lib.is_file() and lib.stat().st_size else None
    return InstalledTorch(torch, env_meta.gpu_fit(torch, found and found.text, local_caps(), found and found.source))


def record(conn: sqlite3.Connection, env: EnvSource, target: Path, result, error: dict | None,
           status: str, started: str) -> None:  # fmt: skip
    """One restores row with what was checked (never an environment variable); status is the outcome's. Its
    detail is the result's to_json() (the --json document) less the name and the target the row has."""
    shown = result.to_json() if result is not None else {}
    detail = error if error else {k: v for k, v in shown.items() if k not in ("name", "target")}
    record_restore(conn, kind="env", mirror_id=env.mirror_id, entry_id=env.entry_id, name=env.name,
                   source=env.archive.path, source_hash=env.archive.blake3, target=str(target), status=status,
                   detail=detail, started_at=started)  # fmt: skip
