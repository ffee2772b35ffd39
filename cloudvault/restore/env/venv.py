"""A venv's tie to the python it was made from: its interpreter links (`bin/python* -> home`), the version that
pyvenv.cfg records, whether that interpreter is here, and moving the venv onto another compatible one (--python).

venv, virtualenv and uv all write `home` and the version (`version`, `version_info`); virtualenv adds
`executable`, `base-prefix`, `base-exec-prefix`, `base-executable`, venv `executable` and `command`."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cloudvault import errors
from cloudvault.archive.scan import venv_interpreter_root
from cloudvault.models import Member
from cloudvault.restore.env import meta as env_meta

VERSION_KEYS = ("version_info", "version")
PROBE = "import json, sys; print(json.dumps([list(sys.version_info[:3]), sys.base_prefix, sys.base_exec_prefix]))"


class BasePythonMissing(errors.EnvironmentProblem):
    """{name} is a venv of {wanted} (Python {version}, its pyvenv.cfg); {found}; nothing was written. Pass
    --python PATH naming a Python {minor} here"""


class PythonIncompatible(errors.UsageError):
    """--python {path} is Python {got}; {name} was made with Python {version}: it needs a Python {minor}"""


@dataclass
class Venv:
    """What pyvenv.cfg and the interpreter links of one venv say, read from its members before anything is written."""

    config: dict[str, str]
    links: dict[str, str] = field(default_factory=dict)  # env-relative bin/python* -> its target as packed

    @property
    def version(self) -> str:
        raw = next((self.config[k] for k in VERSION_KEYS if self.config.get(k)), "")
        return ".".join(re.findall(r"\d+", raw)[:3])

    @property
    def minor(self) -> str:
        return _minor(self.version)

    @property
    def base(self) -> str | None:
        """The interpreter the links lead to: an absolute link target, else home/python3 (a --copies venv)."""
        outside = sorted(t for t in self.links.values() if t.startswith("/"))
        if outside:
            return outside[0]
        return None


def parse_config(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def read_venv(members: list[Member], folder: str) -> Venv | None:
    """The venv whose root is folder, from its members' names and links alone (nothing is read from the archive:
    pyvenv.cfg may lie at its end); None if the env has no pyvenv.cfg at its root. Its config is read from the
    staged copy (`load_config`)."""
    cfg_path = f"{folder}/pyvenv.cfg" if folder else "pyvenv.cfg"
    if not any(m.path == cfg_path and m.type == "file" for m in members):
        return None
    paths = [m.path for m in members]
    venv = Venv({"version": env_meta.python_version(paths) or ""})
    for m in members:
        if m.type == "symlink" and venv_interpreter_root(m.path, m.type, m.link_target) == folder:
            venv.links[m.path[len(folder) + 1 :] if folder else m.path] = m.link_target or ""
    return venv


def load_config(venv: Venv, root: Path) -> None:
    """pyvenv.cfg of the staged env: its recorded version replaces the one the lib/pythonX.Y folder told."""
    with contextlib.suppress(OSError):
        venv.config = parse_config((root / "pyvenv.cfg").read_text(errors="replace"))


def probe(python: str) -> tuple[str, str, str] | None:
    """(version x.y.z, base_prefix, base_exec_prefix) of a python here, or None when it cannot run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        done = subprocess.run([python, "-I", "-c", PROBE], capture_output=True, text=True, env=env, timeout=60,
                              check=False)  # fmt: skip
        version, base_prefix, base_exec = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return ".".join(map(str, version)), base_prefix, base_exec


@dataclass
class Interpreter:
    """The python a restored venv will run on: the one it was made with, or --python's."""

    old: str | None  # the absolute link target as packed
    new: str | None  # what the links will say (None: unchanged)
    version: str
    base_prefix: str = ""
    base_exec_prefix: str = ""


def choose_interpreter(name: str, venv: Venv, python: str | None) -> Interpreter:
    """Check, before anything is written, that the venv can run here: the base interpreter exists and is of the
    venv's major.minor (its lib/pythonX.Y); else --python names one of the same major.minor. Raises
    BasePythonMissing (6) or PythonIncompatible (2). `check_version` repeats it against pyvenv.cfg once staged."""
    wanted = venv.base
    if python:
        path = os.path.abspath(os.path.expanduser(python))
        found = probe(path)
        if found is None:
            raise PythonIncompatible(path=path, got="not runnable", name=name, version=venv.version, minor=venv.minor)
        if venv.minor and _minor(found[0]) != venv.minor:
            raise PythonIncompatible(path=path, got=found[0], name=name, version=venv.version, minor=venv.minor)
        return Interpreter(wanted, path, found[0], found[1], found[2])
    if wanted is None:
        return Interpreter(None, None, venv.version)
    found = probe(wanted) if os.path.exists(wanted) else None
    if found is None:
        why = f"{wanted} is not here" if not os.path.exists(wanted) else f"{wanted} does not run here"
        raise BasePythonMissing(name=name, wanted=wanted, version=venv.version or "?", found=why, minor=venv.minor)
    interpreter = Interpreter(wanted, None, found[0], found[1], found[2])
    check_version(name, venv, interpreter)
    return interpreter


def check_version(name: str, venv: Venv, interpreter: Interpreter) -> None:
    """The base interpreter is the version_info pyvenv.cfg records (all of it once the config is read; its
    major.minor before); --python's need only share the major.minor."""
    if interpreter.old is None or not venv.version:
        return
    recorded = venv.version.split(".")
    here = interpreter.version.split(".")[: 2 if interpreter.new else len(recorded)]
    same = here == recorded[:2] if interpreter.new else here == recorded
    if not same:
        raise BasePythonMissing(name=name, wanted=interpreter.new or interpreter.old, version=venv.version,
                                minor=venv.minor, found=f"it is Python {interpreter.version} here")  # fmt: skip


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def link_target(target: str, interpreter: Interpreter | None) -> str:
    """An interpreter link's target as restored: as packed, or the --python interpreter for the outside one."""
    if interpreter and interpreter.new and target.startswith("/"):
        return interpreter.new
    return target


def retarget_config(root: Path, interpreter: Interpreter) -> bool:
    """pyvenv.cfg names the --python interpreter: home, version, executable and virtualenv's base keys; the
    old interpreter's path elsewhere (venv's `command`) replaced. Written to a temp name and renamed."""
    if not interpreter.new or not interpreter.old:
        return False
    path = root / "pyvenv.cfg"
    lines = path.read_text().splitlines()
    old_home = os.path.dirname(interpreter.old)
    values = {
        "home": os.path.dirname(interpreter.new),
        "executable": interpreter.new,
        "base-executable": interpreter.new,
        "base-prefix": interpreter.base_prefix,
        "base-exec-prefix": interpreter.base_exec_prefix,
    }
    out = []
    for line in lines:
        key, sep, value = line.partition("=")
        k = key.strip()
        if sep and k in values and values[k]:
            line = f"{key.rstrip()} = {values[k]}"
        elif sep and k in VERSION_KEYS:
            line = f"{key.rstrip()} = {_version_like(value.strip(), interpreter.version)}"
        elif sep and k == "command":
            line = line.replace(interpreter.old, interpreter.new).replace(old_home + "/", values["home"] + "/")
        out.append(line)
    tmp = path.with_name(".pyvenv.cfg.vault-rewrite")
    tmp.write_text("\n".join(out) + "\n")
    os.replace(tmp, path)
    return True


def _version_like(old: str, version: str) -> str:
    """The new version in the old value's shape: 3.12.3, or virtualenv's 3.12.3.final.0."""
    parts = old.split(".")
    return version + ("." + ".".join(parts[3:]) if len(parts) > 3 else "")
