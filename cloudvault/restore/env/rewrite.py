"""Move a staged env from its old prefix to its new one: each file that held the old prefix rewritten as text,
patched as a binary (ELF run paths made relative, strings NUL-padded), or, for byte-compiled files, removed and
compiled again by the env's own python at the new prefix. What cannot be moved is listed, never hidden."""

from __future__ import annotations

import json
import mmap
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import blake3

from cloudvault.restore.env import elf
from cloudvault.restore.env.meta import CondaPath
from cloudvault.restore.env.prefix import patch_binary, rewrite_text, shebang_runs


@dataclass
class Relocation:
    """Every file rewritten (path, how, new blake3), every one that could not be, and the byte-code handled."""

    rewritten: list[dict] = field(default_factory=list)
    unpatched: list[dict] = field(default_factory=list)
    pyc_removed: int = 0
    pyc_recompiled: int = 0
    pyc_note: str = ""


def relocate(
    root: Path, holding: dict[str, bool], old: str, new: str, conda: dict[str, CondaPath], original: str | None = None
) -> Relocation:
    """Rewrite, under root (the staged env), each file in holding (rel path -> has a NUL byte) from old to new.

    original is the prefix the env was installed at: a binary conda did not record may grow back into the NULs
    an earlier, shorter move left, up to that prefix's length."""
    moved = Relocation()
    sources: set[str] = set()
    for rel in sorted(holding):
        path = root / rel
        if rel.endswith(".pyc"):
            if "__pycache__" not in rel and not (root / _source_of(rel)).is_file():
                continue  # a sourceless module: its only code; the old paths are only in its tracebacks
            path.unlink()
            moved.pyc_removed += 1
            sources.add(_source_of(rel))
            continue
        info = conda.get(rel)
        binary = info.file_mode == "binary" if info and info.file_mode else holding[rel]
        if binary:
            placeholder = len(info.placeholder) if info and info.placeholder else None
            _binary(path, rel, old, new, placeholder, placeholder or len(original or old), moved)
        else:
            _text(path, rel, old, new, moved)
            if rel.endswith(".py"):
                moved.pyc_removed += _drop_pyc(path)
                sources.add(rel)
    recompile(root, sorted(s for s in sources if (root / s).is_file()), new, moved)
    return moved


def _source_of(pyc: str) -> str:
    """lib/x/__pycache__/m.cpython-311.pyc -> lib/x/m.py; a legacy m.pyc -> m.py."""
    folder, name = os.path.split(pyc)
    if os.path.basename(folder) == "__pycache__":
        return os.path.join(os.path.dirname(folder), name.split(".", 1)[0] + ".py")
    return pyc[: -len(".pyc")] + ".py"


def _drop_pyc(source: Path) -> int:
    cache = source.parent / "__pycache__"
    stale = list(cache.glob(source.stem + ".*.pyc")) if cache.is_dir() else []
    for pyc in stale:
        pyc.unlink()
    return len(stale)


def _text(path: Path, rel: str, old: str, new: str, moved: Relocation) -> None:
    data = path.read_bytes()
    out = rewrite_text(data, old.encode(), new.encode())
    if not shebang_runs(out, new.encode()):
        why = "its #! line is over 127 bytes or has a space, and it is not a Python script"
        moved.unpatched.append({"path": rel, "why": why})
    _replace(path, out)
    moved.rewritten.append({"path": rel, "how": "text", "blake3": blake3.blake3(out).hexdigest()})


def _replace(path: Path, data: bytes) -> None:
    """New bytes under a temp name beside path, same mode and mtime, renamed over it."""
    st = path.stat()
    tmp = path.with_name(f".{path.name}.vault-rewrite")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, st.st_mode & 0o7777)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)


def _binary(path: Path, rel: str, old: str, new: str, placeholder: int | None, room: int, moved: Relocation) -> None:
    st = path.stat()
    os.chmod(path, st.st_mode | 0o200)  # a read-only library is patched all the same, its mode kept
    try:
        with open(path, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as buf:
            run_paths = elf.patch_run_paths(buf, old.encode(), os.path.dirname(rel)) if elf.is_elf(buf[:4]) else 0
            patched, misfits = patch_binary(buf, old.encode(), new.encode(), room)
            buf.flush()
            digest = blake3.blake3(buf).hexdigest()
    finally:
        os.chmod(path, st.st_mode & 0o7777)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    how = "+".join(h for h, n in (("elf-run-path", run_paths), ("nul-padded", patched)) if n) or "binary"
    moved.rewritten.append({"path": rel, "how": how, "blake3": digest})
    if misfits:
        limit = f"{room} bytes (its conda placeholder)" if placeholder else f"{room} bytes (the original prefix)"
        moved.unpatched.append(
            {
                "path": rel,
                "why": f"{len(misfits)} string(s) hold the old prefix and the new one does not fit: at most {limit}",
                "offsets": misfits[:10],
            }
        )


def env_python(root: Path) -> Path | None:
    for name in ("bin/python3", "bin/python"):
        if (root / name).exists():
            return root / name
    return None


# Run by the env's own python (any 3.x): py_compile's dfile is the path its code objects and tracebacks show.
COMPILE = """import json, py_compile, sys
for source, shown in json.load(sys.stdin):
    try:
        py_compile.compile(source, dfile=shown, doraise=True)
    except Exception as exc:
        print("%s: %s" % (shown, exc))
"""


def recompile(root: Path, sources: list[str], new: str, moved: Relocation, workers: int | None = None) -> None:
    """Byte-compile sources with the env's own python (its magic number, its optimisations), recording the new
    prefix's paths, not staging's, in the code objects; on up to `workers` processes at once (every core)."""
    python = env_python(root)
    if not sources:
        return
    if python is None:
        moved.pyc_note = "no python in the env: byte-code removed, not recompiled"
        return
    from cloudvault.index.budget import cores_present

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"PYTHONDONTWRITEBYTECODE": "1"}
    parts = max(1, min(workers or cores_present(), len(sources) // PER_PROCESS))
    shares = [sources[i::parts] for i in range(parts)]
    procs, notes = [], []
    try:
        for share in shares:  # every process gets its share first: they compile at once
            proc = subprocess.Popen([str(python), "-c", COMPILE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, env=env, cwd=root)  # fmt: skip
            procs.append(proc)
            proc.stdin.write(json.dumps([[str(root / s), f"{new}/{s}"] for s in share]))
            proc.stdin.close()
        for proc in procs:
            out = proc.stdout.read()
            proc.wait(timeout=600)
            if proc.returncode != 0 or out.strip():
                notes.append(f"exit {proc.returncode}: {out[-300:]}".strip())
    except (OSError, subprocess.SubprocessError) as exc:
        for proc in procs:
            proc.kill()
        moved.pyc_note = f"the env's python could not run ({exc}): byte-code removed, not recompiled"
        return
    moved.pyc_recompiled = sum(1 for s in sources if _has_pyc(root / s))
    if notes:
        moved.pyc_note = f"byte-compiling: {notes[0]}"


PER_PROCESS = 200  # sources per compiling process at the least: fewer are not worth a python's start-up


def _has_pyc(source: Path) -> bool:
    cache = source.parent / "__pycache__"
    return cache.is_dir() and any(cache.glob(source.stem + ".*.pyc"))
