"""Move a staged env from its old prefix to its new one: each file that held the old prefix rewritten as text,
patched as a binary (ELF run paths made relative, strings NUL-padded), or, for byte-compiled files, moved in
place by the env's own python (the code objects' file names; the header, valid for the unchanged source, kept),
or removed and compiled again where their source was rewritten or a constant holds the old prefix. What cannot be
moved is listed, never hidden."""

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
    pyc_moved: int = 0
    pyc_note: str = ""


def relocate(
    root: Path, holding: dict[str, bool], old: str, new: str, conda: dict[str, CondaPath], original: str | None = None
) -> Relocation:
    """Rewrite, under root (the staged env), each file in holding (rel path -> has a NUL byte) from old to new.

    original is the prefix the env was installed at: a binary conda did not record may grow back into the NULs
    an earlier, shorter move left, up to that prefix's length."""
    moved = Relocation()
    sources: set[str] = set()  # .py files rewritten as text: their byte-code is compiled again
    pycs: list[str] = []
    for rel in sorted(holding):
        path = root / rel
        if rel.endswith(".pyc"):
            if "__pycache__" not in rel and not (root / _source_of(rel)).is_file():
                continue  # a sourceless module: its only code; the old paths are only in its tracebacks
            pycs.append(rel)
            continue
        info = conda.get(rel)
        binary = info.file_mode == "binary" if info and info.file_mode else holding[rel]
        if binary:
            placeholder = len(info.placeholder) if info and info.placeholder else None
            _binary(path, rel, old, new, placeholder, placeholder or len(original or old), moved)
        else:
            _text(path, rel, old, new, moved)
            if rel.endswith(".py"):
                sources.add(rel)
    for rel in sources:
        moved.pyc_removed += _drop_pyc(root / rel)
    kept = [rel for rel in pycs if _source_of(rel) not in sources]
    for rel in move_pyc(root, kept, old, new, moved):
        (root / rel).unlink()
        moved.pyc_removed += 1
        sources.add(_source_of(rel))
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
        print("%s: %s" % (shown, exc), file=sys.stderr)
"""

# Run by the env's own python (3.8+: code.replace): a .pyc whose only old-prefix strings are its code objects' file
# names gets the new prefix there, its 16-byte header (magic, source mtime and size, or hash) kept, so it stays
# valid for its unchanged source. One whose constants hold the old prefix, or of another magic, is printed.
MOVE_PYC = """import importlib.util, json, marshal, os, sys
old, new = sys.argv[1], sys.argv[2]
CODE = type(compile("", "", "exec"))
def holds(value):
    if isinstance(value, str):
        return old in value
    if isinstance(value, bytes):
        return old.encode() in value
    if isinstance(value, (tuple, frozenset)):
        return any(holds(v) for v in value)
    return False
def moved(code):
    consts = tuple(moved(c) if isinstance(c, CODE) else c for c in code.co_consts)
    if any(holds(c) for c in consts if not isinstance(c, CODE)):
        raise ValueError("a constant holds the old prefix")
    name = code.co_filename
    if name == old or name.startswith(old + "/"):
        name = new + name[len(old):]
    return code.replace(co_filename=name, co_consts=consts)
for path in json.load(sys.stdin):
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if data[:4] != importlib.util.MAGIC_NUMBER:
            raise ValueError("another magic number")
        out = data[:16] + marshal.dumps(moved(marshal.loads(data[16:])))
        if old.encode() in out.replace(new.encode(), b""):
            raise ValueError("the old prefix is still there")
        st = os.stat(path)
        tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".vault-rewrite")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, st.st_mode & 0o7777)
        with os.fdopen(fd, "wb") as fh:
            fh.write(out)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, path)
    except Exception:
        print(path)
"""


def recompile(root: Path, sources: list[str], new: str, moved: Relocation) -> None:
    """Byte-compile sources with the env's own python (its magic number, its optimisations), recording the new
    prefix's paths, not staging's, in the code objects."""
    if not sources:
        return
    if env_python(root) is None:
        moved.pyc_note = "no python in the env: byte-code removed, not recompiled"
        return
    try:
        _, notes = in_env_python(root, COMPILE, [], [[str(root / s), f"{new}/{s}"] for s in sources])
    except (OSError, subprocess.SubprocessError) as exc:
        moved.pyc_note = f"the env's python could not run ({exc}): byte-code removed, not recompiled"
        return
    moved.pyc_recompiled = sum(1 for s in sources if _has_pyc(root / s))
    if notes:
        moved.pyc_note = f"byte-compiling: {notes[0]}"


def move_pyc(root: Path, pycs: list[str], old: str, new: str, moved: Relocation) -> list[str]:
    """Move each byte-compiled file to the new prefix in place (MOVE_PYC); the ones it could not move, returned,
    are removed and compiled again by the caller. Parsing nothing, it is ~10x faster than compiling."""
    if not pycs or env_python(root) is None:
        return pycs
    try:
        lines, _ = in_env_python(root, MOVE_PYC, [old, new], [str(root / p) for p in pycs])
    except (OSError, subprocess.SubprocessError):
        return pycs
    left = {os.path.relpath(line, root) for line in lines}
    moved.pyc_moved = len(pycs) - len(left)
    return [p for p in pycs if p in left]


def in_env_python(root: Path, script: str, argv: list[str], items: list, workers: int | None = None):
    """Run script with the env's python on shares of items (JSON on its stdin), up to `workers` processes at once
    (every core); returns the lines they printed and a note per process that failed."""
    from cloudvault.index.budget import cores_present

    python = env_python(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"PYTHONDONTWRITEBYTECODE": "1"}
    parts = max(1, min(workers or cores_present(), len(items) // PER_PROCESS))
    procs, lines, notes = [], [], []
    try:
        for i in range(parts):  # every process gets its share first: they run at once
            proc = subprocess.Popen([str(python), "-c", script, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env, cwd=root)  # fmt: skip
            procs.append(proc)
            proc.stdin.write(json.dumps(items[i::parts]))
            proc.stdin.close()
            proc.stdin = None  # written and closed: communicate() only reads
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            lines += out.splitlines()
            if proc.returncode != 0 or err.strip():
                notes.append(f"exit {proc.returncode}: {err[-300:]}".strip())
    except BaseException:
        for proc in procs:
            proc.kill()
        raise
    return lines, notes


PER_PROCESS = 200  # sources per compiling process at the least: fewer are not worth a python's start-up


def _has_pyc(source: Path) -> bool:
    cache = source.parent / "__pycache__"
    return cache.is_dir() and any(cache.glob(source.stem + ".*.pyc"))
