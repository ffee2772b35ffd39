"""Every child process vault starts runs the installed package, never a `cloudvault/` folder that happens to be in
its working directory (a clone of this repository, a mirror holding code, code staged into a run folder): the
mount's child, a recipe's inputs read through a mount, the runners, the Slurm jobs of `vault repro` and `vault index`.
Each is started from (or runs in) a folder holding an impostor package whose import writes a marker file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from integration.test_mount import fuse  # noqa: F401  (the fixture: fusermount3, /dev/fuse, mfusepy)

from cloudvault.mount.session import mounted

IMPOSTOR = """import pathlib, sys
pathlib.Path({marker!r}).open("a").write(" ".join(sys.argv) + "\\n")
"""
RECIPE = "014_ss20_temp0"
ENTRY = "014_ss20_temp0_chunk1024"


def impostor(folder: Path, marker: Path) -> Path:
    """folder/cloudvault: a package whose import (and `python -m cloudvault`) appends its argv to marker."""
    pkg = folder / "cloudvault"
    pkg.mkdir(parents=True)
    for name in ("__init__.py", "__main__.py"):
        (pkg / name).write_text(IMPOSTOR.format(marker=str(marker)))
    return pkg


def _written(marker: Path, tally) -> str:
    text = marker.read_text() if marker.exists() else ""
    tally("write_outside", len(text.splitlines()))  # each line: an impostor run in vault's place
    return text


def _vault_script() -> str:
    """The installed `vault` command beside this Python (its sys.path starts at its own folder, not the cwd)."""
    return str(Path(sys.executable).with_name("vault"))


@pytest.mark.fuse
def test_the_mount_child_runs_the_installed_vault_not_the_working_directorys(demo_catalog, fuse, tmp_path,  # noqa: F811
                                                                             tally):  # fmt: skip
    cwd, marker, point = tmp_path / "clone", tmp_path / "marker", tmp_path / "m"
    impostor(cwd, marker)
    point.mkdir()
    tally("hostile_input")
    try:
        done = subprocess.run([_vault_script(), "--catalog", str(demo_catalog), "mount", "--entry", "018", str(point)],
                              cwd=cwd, capture_output=True, text=True, timeout=60)  # fmt: skip
        listed = os.listdir(point) if done.returncode == 0 else []
    finally:
        if mounted(point):
            subprocess.run(["fusermount3", "-u", "-z", str(point)], check=False)
    assert _written(marker, tally) == ""
    assert done.returncode == 0 and "data" in listed, done.stderr


@pytest.mark.fuse
def test_inputs_via_mount_start_the_installed_vault_not_the_working_directorys(demo_catalog, fuse, tmp_path,  # noqa: F811
                                                                               vault, monkeypatch, tally):  # fmt: skip
    text = (REPO / "recipes/repro/016_plots.toml").read_text()
    recipe = tmp_path / "016_plots_mounted.toml"
    recipe.write_text(text.replace("[inputs.results]\n", '[inputs.results]\nvia = "mount"\n'))
    cwd, marker = tmp_path / "clone", tmp_path / "marker"
    impostor(cwd, marker)
    monkeypatch.chdir(cwd)
    tally("hostile_input")
    result = vault("--catalog", str(demo_catalog), "repro", str(recipe), "--out", str(tmp_path / "runs"))
    assert _written(marker, tally) == ""
    assert result.code == 0 and "REPRODUCED" in result.out, result.err


@pytest.fixture
def mirror_holding_code(demo_mirror, tmp_path, vault) -> tuple[Path, Path]:
    """A copy of the demo mirror whose entry 014 holds a `cloudvault` package among its code (an impostor),
    indexed; and a 014 stand-in recipe that stages that package into the run's work folder, where the runner
    runs. (catalog, recipe)."""
    root = tmp_path / "own/Marvell_cloud"
    shutil.copytree(demo_mirror, root, symlinks=True)
    impostor(root / ENTRY / "data/pkg", tmp_path / "marker")
    db = tmp_path / "own.db"
    r = vault("--catalog", str(db), "index", "--mirror", "marvell_cloud", "--quiet", str(root))
    assert r.code == 0, r.err
    recipe = tmp_path / f"{RECIPE}_with_code.toml"
    text = (REPO / f"recipes/repro/{RECIPE}.toml").read_text()
    recipe.write_text(text.replace("[run]\n", '[inputs.pkg]\npath = "data/pkg/cloudvault"\nto = "work/cloudvault"\n\n'
                                              "[run]\n"))  # fmt: skip
    return db, recipe


def test_runners_run_the_installed_vault_not_a_package_staged_into_their_work_folder(mirror_holding_code, tmp_path,
                                                                                     vault, tally):  # fmt: skip
    """The stand-in runs in RUN/work (`{python} -m cloudvault.repro.standin`), where the recipe staged a
    `cloudvault/` folder from the mirror: it must still be vault's own runner that runs."""
    db, recipe = mirror_holding_code
    tally("hostile_input")
    result = vault("--catalog", str(db), "repro", str(recipe), "--standin", "--out", str(tmp_path / "runs"))
    (run,) = (tmp_path / "runs").iterdir()
    assert (run / "work/cloudvault/__init__.py").is_file()  # the impostor was there, beside the runner
    assert _written(tmp_path / "marker", tally) == ""
    assert result.code == 0 and "REPRODUCED" in result.out, result.err


def test_repro_slurm_job_runs_the_installed_vault_not_a_package_in_its_work_folder(mirror_holding_code, tmp_path,
                                                                                   tally):  # fmt: skip
    """The job script `vault repro --executor slurm` submits, run as a Slurm node would (bash, task 0), in a run
    folder whose work folder holds the impostor."""
    from cloudvault.catalog.db import open_catalog
    from cloudvault.progress import Progress
    from cloudvault.repro import plan as planning
    from cloudvault.repro.executors.slurm import render
    from cloudvault.repro.recipe import load
    from cloudvault.repro.run import stage_inputs

    db, recipe_path = mirror_holding_code
    run_dir = tmp_path / "runs/slurm-run"
    run_dir.mkdir(parents=True)
    conn = open_catalog(db, readonly=True)
    try:
        plan = planning.build(conn, load(str(recipe_path)), run_dir, planning.RunOptions(run_dir.parent, True, True))
        stage_inputs(conn, plan, Progress())
    finally:
        conn.close()
    assert (run_dir / "work/cloudvault/__main__.py").is_file()
    (run_dir / "logs").mkdir()  # as SlurmExecutor.submit makes it
    tally("hostile_input")
    for task in range(len(plan.processes)):
        done = subprocess.run(["bash", "-c", render(plan)], cwd=run_dir, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "SLURM_ARRAY_TASK_ID": str(task)})  # fmt: skip
        err = run_dir / f"logs/{plan.processes[task].name}.err"
        assert done.returncode == 0, done.stderr + (err.read_text() if err.exists() else "")
    assert _written(tmp_path / "marker", tally) == ""


def test_index_slurm_jobs_run_the_installed_vault_not_the_submitting_folders(tmp_path, tally):
    """`vault index --slurm`'s task and merge scripts, run as a Slurm node would, from a folder (a clone of this
    repository) holding the impostor."""
    from cli.test_index_slurm import _mirror, _write_plan

    from cloudvault.index.slurm import Layout, render_array, render_merge

    mirror, db = _mirror(tmp_path / "m"), tmp_path / "c.db"
    plan = _write_plan(db, mirror, 2)
    cwd, marker = tmp_path / "clone", tmp_path / "marker"
    impostor(cwd, marker)
    tally("hostile_input")
    scripts = [(render_array(Layout(db), plan, None), {"SLURM_ARRAY_TASK_ID": str(t)}) for t in range(2)]
    for script, env in [*scripts, (render_merge(Layout(db), plan, None), {})]:
        done = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120,
                              env={**os.environ, **env})  # fmt: skip
        assert done.returncode in (0, 5), done.stderr  # 5: the mirror's listings name paths not in archives
    assert _written(marker, tally) == ""


def test_every_shipped_recipe_that_runs_vault_runs_it_with_python_P():
    """The runners a recipe names by module (`{python} -m cloudvault.repro.gpu_smoke`, the stand-in) start with
    -P, so the run folder they work in (which holds staged inputs and code) is never on their sys.path. This
    covers the GPU recipes, which cannot run here."""
    import tomllib

    programs = []
    for path in sorted((REPO / "recipes/repro").glob("*.toml")):
        doc = tomllib.loads(path.read_text())
        programs += [(path.name, doc[s]["program"]) for s in ("run", "standin") if "program" in doc.get(s, {})]
    vaults = [(name, p) for name, p in programs if "cloudvault" in p]
    assert len(vaults) >= 5
    assert [(name, p) for name, p in vaults if not p.startswith("{python} -P -m cloudvault.")] == []


def test_the_preflight_module_probe_does_not_find_modules_in_vaults_working_directory(demo_catalog, tmp_path, vault,
                                                                                      monkeypatch, tally):  # fmt: skip
    """[preflight] python_modules asks the runner's Python whether it can import them; a folder of that name where
    vault was started (never on the runner's path) must not answer for it: exit 7, nothing run."""
    text = (REPO / "recipes/repro/016_plots.toml").read_text()
    recipe = tmp_path / "016_needs_a_module.toml"
    recipe.write_text(text + '\n[preflight]\npython_modules = ["vault_absent_module"]\n')
    cwd, marker = tmp_path / "clone", tmp_path / "marker"
    (cwd / "vault_absent_module").mkdir(parents=True)
    (cwd / "vault_absent_module/__init__.py").write_text(IMPOSTOR.format(marker=str(marker)))
    monkeypatch.chdir(cwd)
    tally("hostile_input")
    result = vault("--catalog", str(demo_catalog), "repro", str(recipe), "--out", str(tmp_path / "runs"))
    assert result.code == 7 and "vault_absent_module" in result.err, (result.code, result.err)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert _written(marker, tally) == ""


def test_the_demo_makes_its_venvs_with_the_installed_venv_module_not_the_working_directorys(tmp_path, monkeypatch,
                                                                                           tally):  # fmt: skip
    """`vault demo` builds envs with `python -m venv`: a `venv/` package where it was started must not run."""
    from cloudvault.demo.envs import make_venv

    cwd, marker = tmp_path / "clone", tmp_path / "marker"
    (cwd / "venv").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py"):
        (cwd / "venv" / name).write_text(IMPOSTOR.format(marker=str(marker)))
    monkeypatch.chdir(cwd)
    tally("hostile_input")
    build = tmp_path / "env"
    make_venv(build, str(build))
    assert _written(marker, tally) == ""
    assert (build / "bin/python").is_file() and (build / "pyvenv.cfg").is_file()
