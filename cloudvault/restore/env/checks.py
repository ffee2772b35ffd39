"""Smoke checks run inside a restored env: its python knows its new prefix, then the recipe's own commands
(console scripts, compiled-extension imports), each with the env's bin/ first on PATH."""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
from pathlib import Path

from cloudvault.restore.env.results import SmokeCheck
from cloudvault.restore.env.rewrite import env_python

TIMEOUT = 300
PREFIX_CHECK = "python -c 'import sys; print(sys.prefix)'"


def check_env(prefix: Path) -> dict[str, str]:
    """The environment a check runs in: the env's bin/ first, no PYTHONPATH/PYTHONHOME leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "VIRTUAL_ENV"}
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["CONDA_PREFIX"] = str(prefix)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a check must not leave byte-code behind
    return env


def cannot_run(path: Path) -> str | None:
    """Why a program the env names (bin/python, a link to its interpreter) cannot be started: its links loop or
    lead to nothing; None when it can, or when the env has no such name."""
    if not os.path.lexists(path) or os.path.exists(path):
        return None
    chain, at = [path.name], path
    while os.path.islink(at) and len(chain) <= 8:
        chain.append(os.readlink(at))
        at = at.parent / chain[-1]
    if os.path.islink(at):
        return f"bin/{path.name} cannot run: its links form a loop ({' -> '.join(chain)} ...)"
    return f"bin/{path.name} cannot run: its link leads to nothing ({' -> '.join(chain)})"


def _failed(name: str, command: str, why: str) -> SmokeCheck:
    """A check that could not be run: it decided nothing, so it failed."""
    return SmokeCheck(name, command, False, None, why)


def run_one(prefix: Path, name: str, command: str, env: dict[str, str]) -> SmokeCheck:
    """One check: exit 0 passes; the last lines of its output are kept. A program the env names but cannot start
    fails the check (never a program of the same name found further along PATH)."""
    argv = shlex.split(command)
    local = prefix / "bin" / argv[0]
    why = cannot_run(local) if argv and "/" not in argv[0] else None
    if why:
        return _failed(name, command, why)
    if local.exists():
        argv[0] = str(local)
    try:
        done = subprocess.run(argv, cwd=prefix, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return _failed(name, command, str(exc))
    output = (done.stdout + done.stderr).strip()
    return SmokeCheck(name, command, done.returncode == 0, done.returncode, output[-400:])


def run_checks(prefix: Path, checks: dict[str, str]) -> list[SmokeCheck]:
    """The built-in prefix check (when the env has a python, or names one it cannot start), then the recipe's
    checks in order."""
    env = check_env(prefix)
    results = []
    named = [prefix / "bin" / n for n in ("python3", "python") if os.path.lexists(prefix / "bin" / n)]
    why = next(filter(None, map(cannot_run, named)), None)
    if why and env_python(prefix) is None:
        results.append(_failed("prefix", PREFIX_CHECK, why))
    elif env_python(prefix) is not None:
        result = run_one(prefix, "prefix", PREFIX_CHECK, env)
        said = result.output.splitlines()[-1] if result.output else ""
        if result.ok and os.path.realpath(said) != os.path.realpath(prefix):
            result = dataclasses.replace(result, ok=False, output=f"sys.prefix is {said!r}, not {str(prefix)!r}")
        results.append(result)
    for name, command in checks.items():
        results.append(run_one(prefix, name, command, env))
    return results
