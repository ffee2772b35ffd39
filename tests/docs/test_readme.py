"""The README's tour runs as written after `vault demo`, with its shown output; every relative link resolves; the
README's test command is the one CI runs, as a newcomer and with every service (the docs' examples:
test_examples.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from conftest import REPO

ROOT = REPO
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
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


def test_the_readme_tour_runs_as_written_after_vault_demo(in_demo_home, vault):
    after_demo = in_demo_home
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


def test_every_relative_link_resolves():
    broken = []
    for page in [README, *DOCS]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            path = page.parent / target.split("#", 1)[0]
            if not path.exists() and not (path.resolve().parent == (ROOT / "docs").resolve() and path.name in PENDING):
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken


def readme_commands() -> tuple[str, str]:
    """The README's two commands, as a newcomer copies them (less their comments)."""
    block = re.search(r"```bash\n(.*?)```", README.read_text(), re.S).group(1).splitlines()
    demo, tests = (line.split("  #", 1)[0].strip() for line in block[:2])
    return demo, tests


def test_ci_runs_the_readmes_test_command_as_a_newcomer_then_with_every_service():
    """.ci/run reads the README's second command from README.md (no copy to drift) and runs it twice: first as a
    newcomer (fresh copy, fresh venv and HOME, CI unset, no services, no torch), then with everything and CI=true."""
    import subprocess

    demo, tests = readme_commands()
    assert demo == "pip install . && vault demo"
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests not in ci and "--plan" in ci  # read from the README, not written out; --plan runs nothing
    plan = subprocess.run(["bash", str(ROOT / ".ci" / "run"), "--plan"], capture_output=True, text=True, check=True)
    phases = plan.stdout.splitlines()
    assert [p.split(":", 1)[0] for p in phases] == ["phase 1 (newcomer", "phase 2 (full"]
    assert all(p.endswith(f"): {tests}") for p in phases), phases
    newcomer = ci[ci.index("Phase 1") : ci.index("Phase 2 (full)")]
    for promise in ("unset CI ", "python3 -m venv", 'HOME="$newcomer/home"', 'eval "$readme_tests"'):
        assert promise in newcomer
    assert "torch" not in newcomer and ".ci/services" not in newcomer
    full = ci[ci.index("Phase 2 (full)") :]
    assert full.index(".ci/services") < full.index('eval "$readme_tests"') and "export CI=true" in full


def test_the_test_run_prints_each_skip_with_its_reason():
    """Skips are allowed on a newcomer's machine, each with its reason: pytest's -r report names them."""
    import tomllib

    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert re.search(r"(^|\s)-r\w*[as]", addopts)


def test_the_readme_requirements_name_every_extra():
    """Each optional extra of pyproject (but the test extra, which the README's test command installs) has its
    `pip install 'cloudvault[NAME]'` in the Requirements table."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    requirements = README.read_text().split("## Requirements", 1)[1].split("\n## ", 1)[0]
    missing = [n for n in extras if n != "test" and f"pip install 'cloudvault[{n}]'" not in requirements]
    assert not missing
    assert "fuse3" in requirements
