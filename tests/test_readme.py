"""The README's examples run as written (against the demo mirror), and its two commands are what CI runs."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def readme_commands() -> list[list[str]]:
    """Each `$ vault ...` line of the README, without its comment and any pipe after it."""
    commands = []
    for line in README.read_text().splitlines():
        if line.startswith("$ vault "):
            text = line[2:].split(" #", 1)[0].split(" | ", 1)[0]
            commands.append(shlex.split(text)[1:])
    return commands


def test_every_readme_example_runs_and_exits_zero(demo_mirror, tmp_path, vault, monkeypatch):
    mirror = tmp_path / "demo" / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    monkeypatch.setenv("VAULT_CATALOG", str(tmp_path / "catalog.db"))
    monkeypatch.chdir(tmp_path)
    commands = readme_commands()
    assert len(commands) >= 10
    for args in commands:
        args = [a.replace("~/demo/Marvell_cloud", str(mirror)) for a in args]
        result = vault(*args)
        assert result.code == 0, (args, result.err)
    assert (tmp_path / "out" / "compaction_scores.bin").exists()


def test_readme_test_command_is_the_one_ci_runs():
    block = re.search(r"```bash\n(.*?)```", README.read_text(), re.S).group(1).splitlines()
    demo, tests = (line.split("  #", 1)[0].strip() for line in block[:2])
    assert demo == "pip install . && vault demo"
    ci = (Path(__file__).parents[1] / ".ci" / "run").read_text()
    assert tests in ci.splitlines()
