"""The README's tour runs as written after `vault demo`, with its shown output; every `$ vault` line of the docs
runs on the demo mirror; every relative link resolves; the README's test command is the one CI runs."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from conftest import REPO

ROOT = REPO
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
# in the order the old README walked them: index first, so the later pages find the catalog
COMMAND_PAGES = ["index", "search", "show", "ls", "extract", "verify", "optimize", "demo", "restore-docker", "repro",
                 "compare", "runs", "restore-env", "browse", "mount", "log", "diff"]  # fmt: skip
OWN_PAGES = [ROOT / "docs" / "README.md", *(ROOT / "docs" / "commands" / f"{n}.md" for n in COMMAND_PAGES),
             *(ROOT / "docs" / n for n in ("catalog.md", "recipes.md", "performance.md"))]  # fmt: skip
# docs pages that other issues write (21: repro.md, 25: mount.md, 26: envs.md, 24: architecture.md); linked
# already, and checked like any page once they exist
PENDING = set()


def examples(path: Path) -> list[tuple[list[str], list[str]]]:
    """Each `$ vault ...` line (without its comment and any pipe) and the output lines shown under it, up to the
    next `$` line or the end of its code block."""
    found, current, in_block = [], None, False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_block, current = not in_block, None
            continue
        if line.startswith("$ vault "):
            text = line[2:].split(" #", 1)[0].split(" | ", 1)[0]
            current = (shlex.split(text)[1:], [])
            found.append(current)
        elif line.startswith("$ ") or not in_block:
            current = None
        elif current is not None:
            current[1].append(line)
    return found


VOLATILE = [(re.compile(r"\d{8}T\d{6}Z"), "<time>"), (re.compile(r"\d{4}-\d\d-\d\dT[\d:]+\+00:00"), "<time>"),
            (re.compile(r"\d+\.\d+ s\b"), "<secs>")]  # fmt: skip


def normal(text: str) -> str:
    for pattern, word in VOLATILE:
        text = pattern.sub(word, text)
    return text


@pytest.fixture(scope="module")
def after_demo(tmp_path_factory):
    """A home where `vault demo` was run, as the README's first command runs it."""
    home = tmp_path_factory.mktemp("home")
    mp = pytest.MonkeyPatch()
    mp.setenv("HOME", str(home))
    mp.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    mp.delenv("VAULT_CATALOG", raising=False)
    mp.chdir(home)
    from cloudvault.cli.main import main

    assert main(["demo"]) == 0
    yield home
    mp.undo()


def test_the_readme_tour_runs_as_written_after_vault_demo(after_demo, vault, monkeypatch):
    monkeypatch.setenv("HOME", str(after_demo))
    monkeypatch.setenv("XDG_DATA_HOME", str(after_demo / ".local" / "share"))
    monkeypatch.delenv("VAULT_CATALOG", raising=False)
    monkeypatch.chdir(after_demo)
    tour = examples(README)
    assert len(tour) >= 10
    for args, shown in tour:
        result = vault(*args)
        assert result.code == 0, (args, result.err)
        got = normal((result.out + result.err).replace(f"{after_demo}/", ""))
        for line in shown:
            if line.strip() and line.strip() != "...":
                assert normal(line) in got, (args, line, got)
    assert (after_demo / "out" / "compaction_scores.bin").exists()


def test_every_docs_example_runs_on_the_demo_mirror(demo_mirror, tmp_path, vault, monkeypatch):
    mirror = tmp_path / "demo" / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    monkeypatch.setenv("VAULT_CATALOG", str(tmp_path / "catalog.db"))
    monkeypatch.chdir(tmp_path)
    commands = [args for page in OWN_PAGES for args, _ in examples(page)]
    assert len(commands) >= 20
    for args in commands:
        args = [a.replace("~/demo/Marvell_cloud", str(mirror)) for a in args]
        result = vault(*args)
        assert result.code == 0, (args, result.err)


def test_every_relative_link_resolves():
    broken = []
    assert {p.name for p in (ROOT / "docs" / "commands").glob("*.md")} == {f"{n}.md" for n in COMMAND_PAGES}
    for page in [README, *DOCS]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            path = page.parent / target.split("#", 1)[0]
            if not path.exists() and not (path.resolve().parent == (ROOT / "docs").resolve() and path.name in PENDING):
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken


def test_readme_test_command_is_the_one_ci_runs():
    block = re.search(r"```bash\n(.*?)```", README.read_text(), re.S).group(1).splitlines()
    demo, tests = (line.split("  #", 1)[0].strip() for line in block[:2])
    assert demo == "pip install . && vault demo"
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.splitlines()
