"""What a newcomer gets on a fresh machine is what the README shows: the demo mirror does not depend on the
machine that built it."""

from __future__ import annotations


def test_the_demo_mirror_holds_no_bytecode_of_the_programs_it_ran(tmp_path, monkeypatch):
    """A fresh machine writes bytecode (PYTHONDONTWRITEBYTECODE unset): the lab's programs that the demo runs to
    make its figures and reports must not leave __pycache__ in the mirror (one more file than the README shows)."""
    from cloudvault.demo.build import build_demo

    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setattr("sys.dont_write_bytecode", False)
    root = build_demo(tmp_path)
    made = [p for p in tmp_path.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]
    assert not made
    assert (root / "016_ysshin_rtxpro6000_results/data/results/plot_tps.py").is_file()


def test_a_passing_test_run_leaves_nothing_in_the_temp_dir(tmp_path):
    """The README says a passing run cleans up after itself (pytest's temp folders go; a failed test's stay)."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_errors.py"],
                          cwd=REPO, env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    left = [p for p in temp.rglob("*") if not p.is_dir()]
    assert not left, left[:5]
    assert not [p for p in temp.rglob("pytest-[0-9]*")]
