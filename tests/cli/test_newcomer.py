"""Issue 23: what a newcomer meets in the first hour. One test per message the issue names."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from conftest import REPO

from cloudvault import errors


def _demo_catalog_home() -> Path:
    return Path(os.environ["XDG_DATA_HOME"]) / "cloudvault" / "demo"


def test_demo_without_zstd_is_one_line_naming_the_package_exit_7(vault, tmp_path, monkeypatch):
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "tar").symlink_to("/usr/bin/tar" if os.path.exists("/usr/bin/tar") else "/bin/tar")
    monkeypatch.setenv("PATH", str(bare))
    result = vault("demo", "--dir", str(tmp_path / "d"))
    assert result.code == errors.PREREQUISITE == 7
    assert "apt-get install zstd" in result.err and result.err.count("\n") == 1
    assert not (tmp_path / "d").exists()  # raised before anything started


def test_exit_code_7_does_not_clash():
    assert list(errors.EXIT_CODES).count(7) == 1 and 7 not in (errors.BUG, errors.HUNG_UP, errors.TERMINATED)


def test_ssh_mirror_without_the_ssh_extra_names_the_pip_install(vault, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "paramiko", None)
    result = vault("--catalog", str(tmp_path / "c.db"), "index", "ssh://me@localhost:1/x")
    assert result.code == 7
    assert "pip install 'cloudvault[ssh]'" in result.err and result.err.count("\n") == 1
    assert not (tmp_path / "c.db").exists()


def test_after_the_demo_its_catalog_is_the_default_until_the_user_indexes_their_own(vault, demo_mirror, tmp_path):
    from cloudvault import config

    demo = _demo_catalog_home()
    demo.mkdir(parents=True)
    assert vault("--catalog", str(demo / "catalog.db"), "index", str(demo_mirror)).code == 0
    assert config.catalog_path() == str(demo / "catalog.db")
    result = vault("search", "granite")
    assert result.code == 0 and "004_granite_30b_batch_sweep" in result.out
    own = tmp_path / "mine" / "Marvell_cloud"
    (own / "001_x").mkdir(parents=True)
    (own / "001_x" / "a.txt").write_text("hello\n")
    assert vault("index", str(own)).code == 0  # writes the user's own catalog, never the demo's
    assert config.catalog_path() == str(demo.parent / "catalog.db")
    assert vault("search", "granite").code == 1


def test_a_failed_index_creates_no_catalog(vault, tmp_path):
    db = tmp_path / "c.db"
    result = vault("--catalog", str(db), "index", str(tmp_path / "no" / "such"))
    assert result.code == 3
    assert not list(tmp_path.glob("c.db*"))


def test_mirror_name_typo_is_exit_3_listing_the_known_names(vault, tmp_path):
    (tmp_path / "m").mkdir()
    result = vault("--catalog", str(tmp_path / "c.db"), "index", "--mirror", "marvel_cloud", str(tmp_path / "m"))
    assert result.code == 3
    assert "marvel_cloud" in result.err and "known: marvell_cloud" in result.err
    assert not (tmp_path / "c.db").exists()


def test_unknown_option_has_one_prefix_and_names_the_commands_help(vault):
    result = vault("search", "granite", "--bogus")
    assert result.code == 2
    assert result.err.count("vault:") == 1 and "see `vault search --help`" in result.err


def test_a_misspelt_command_gets_a_suggestion(vault):
    result = vault("serch", "granite")
    assert result.code == 2 and "did you mean `vault search`?" in result.err


def test_restore_env_does_not_show_env_as_required(vault):
    result = vault("restore", "env")
    assert result.code == 2
    assert "required: recipe " in result.err and "ENV" not in result.err


def test_ls_with_a_glob_that_matches_nothing_says_so(vault, demo_catalog):
    result = vault("--catalog", str(demo_catalog), "ls", "018", "nomatch*")
    assert result.code == 1 and "nothing in 018_aicluster_breakdown_debugger matches 'nomatch*'" in result.err


def test_runs_requests_of_an_unknown_run_is_exit_3(vault, demo_catalog):
    result = vault("--catalog", str(demo_catalog), "runs", "--requests", "NOSUCH")
    assert result.code == 3 and "no run 'NOSUCH'" in result.err and "`vault runs`" in result.err


def test_extract_a_folder_without_keep_path_does_not_count_directories(vault, demo_catalog, tmp_path):
    result = vault("--catalog", str(demo_catalog), "extract", "018", "dumps", "-o", str(tmp_path / "d"))
    assert result.code == 0, result.err
    assert (tmp_path / "d" / "accept_meta.json").exists()


def test_a_real_name_clash_names_the_members():
    from types import SimpleNamespace

    import pytest

    from cloudvault.extract import _refuse_name_clash

    members = [SimpleNamespace(path=p, type=t) for p, t in
               [("a/x.json", "file"), ("b/x.json", "file"), ("a/", "dir"), ("b/a", "dir")]]  # fmt: skip
    with pytest.raises(errors.UsageError, match=r"2 members are named 'x.json' \(a/x.json, b/x.json\)"):
        _refuse_name_clash(members)
    _refuse_name_clash(members[:1] + members[2:])  # the folders named a clash with nothing


def test_the_demo_says_in_one_line_when_it_skips_the_docker_load(monkeypatch, capsys, tmp_path):
    from cloudvault.cli import demo
    from cloudvault.tools import docker as docker_daemon

    monkeypatch.setattr(docker_daemon, "daemon_reachable", lambda: False)
    steps = demo._image_journeys()
    assert ("restore", "docker", "tandemspec") not in steps
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "skipping" in err and "no docker daemon" in err


def test_compare_out_on_a_used_folder_does_not_suggest_a_force_it_lacks(tmp_path):
    # through _write: the whole command needs the shipped recipes, which this checkout's tests read from the
    # installed tree
    import pytest

    from cloudvault.repro.judge import write_compared as _write

    (tmp_path / "compare.csv").write_text("x\n")
    with pytest.raises(errors.UsageError) as raised:
        _write(tmp_path, None)  # the judged comparison is not reached: the folder is refused first
    assert "--force" not in raised.value.message and "name a new --out folder" in raised.value.message
    assert (tmp_path / "compare.csv").read_text() == "x\n"


def test_extracting_a_member_flagged_as_a_secret_warns_on_stderr(vault, demo_mirror, demo_catalog, tmp_path):
    import tarfile

    import zstandard

    result = vault("--catalog", str(demo_catalog), "extract", "019", "saturate_env.log", "-o", str(tmp_path / "d"))
    assert result.code == 0, result.err
    warning = [line for line in result.err.splitlines() if "warning" in line]
    assert len(warning) == 1 and "saturate_env.log" in warning[0] and "hf_token_assignment" in warning[0]
    archive = demo_mirror / "019_aicluster_dump_debugger" / "data" / "saturate_logs_n61.tar.zst"
    with zstandard.open(archive, "rb") as raw, tarfile.open(fileobj=raw, mode="r|") as tar:
        original = next(tar.extractfile(m).read() for m in tar if m.name.endswith("logs/saturate_env.log"))
    assert (tmp_path / "d" / "saturate_env.log").read_bytes() == original  # the bytes as they are
    plain = vault("--catalog", str(demo_catalog), "extract", "018", "dumps", "-o", str(tmp_path / "e"))
    assert plain.code == 0 and "warning" not in plain.err


def _damaged_019(vault, demo_mirror, tmp_path) -> Path:
    """A catalog of entry 019 alone whose archive was then damaged inside (same size and mtime: not changed)."""
    import shutil

    mirror = tmp_path / "Marvell_cloud"
    shutil.copytree(demo_mirror / "019_aicluster_dump_debugger", mirror / "019_aicluster_dump_debugger")
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "--quiet", str(mirror)).code == 0
    archive = mirror / "019_aicluster_dump_debugger" / "data" / "saturate_logs_n61.tar.zst"
    st = archive.stat()
    data = bytearray(archive.read_bytes())
    for i in range(40, len(data) - 20, 7):
        data[i] ^= 0x55
    archive.write_bytes(bytes(data))
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns))
    return db


def test_a_damaged_archive_on_extract_is_named(vault, demo_mirror, tmp_path):
    db = _damaged_019(vault, demo_mirror, tmp_path)
    result = vault("--catalog", str(db), "extract", "019", "saturate_env.log", "-o", str(tmp_path / "d"))
    assert result.code == errors.INTEGRITY
    error = result.err.splitlines()[-1]
    assert "019_aicluster_dump_debugger/data/saturate_logs_n61.tar.zst" in error and "damaged archive" in error


def test_verify_of_a_damaged_archive_does_not_say_nothing_was_written(vault, demo_mirror, tmp_path):
    db = _damaged_019(vault, demo_mirror, tmp_path)
    result = vault("--catalog", str(db), "verify", "019")
    assert result.code == errors.INTEGRITY
    assert "damaged archive" in result.out and "written" not in result.out + result.err


def test_optimize_with_nothing_to_copy_says_why_and_reports_no_folder_it_never_made(vault, demo_catalog, tmp_path):
    cache = tmp_path / "cache"
    result = vault("--catalog", str(demo_catalog), "optimize", "021", "--to", str(cache))
    assert result.code == 0, result.err
    assert not cache.exists()
    assert result.out == "nothing written: 2 archive(s) with no frame over 8.0 MB (read whole): no copy needed\n"


def test_the_gpu_recipe_without_torch_names_the_pip_install_before_anything_starts(vault, demo_catalog, tmp_path,
                                                                                    monkeypatch):  # fmt: skip
    bare = tmp_path / "python-without-site"  # the runner's Python, its site-packages (torch) hidden
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bare))
    monkeypatch.setenv("VAULT_RECIPES", str(REPO / "recipes"))  # this checkout's recipe
    runs = tmp_path / "runs"
    result = vault("--catalog", str(demo_catalog), "repro", "gpu_greedy_smoke", "--standin", "--out", str(runs))
    assert result.code == errors.PREREQUISITE == 7, result.err
    assert "pip install torch 'transformers>=5,<6'" in result.err and result.err.count("\n") == 1
    assert not runs.exists()  # neither the stand-in nor a run folder was started


def test_the_docker_executor_reports_how_long_each_container_ran():
    from types import SimpleNamespace

    from cloudvault.repro.executors.base import Job
    from cloudvault.repro.executors.docker import DockerExecutor

    states = {"a": {"Status": "exited", "ExitCode": 0, "StartedAt": "2026-12-04T04:31:00.123456789Z",
                    "FinishedAt": "2026-12-04T04:31:03.623456789Z"}}  # fmt: skip
    executor = DockerExecutor.__new__(DockerExecutor)
    executor._client = SimpleNamespace(inspect_container=lambda cid: {"State": states[cid]})
    plan = SimpleNamespace(processes=[SimpleNamespace(name="gpu0")])
    told = []
    assert executor.wait(Job(plan, ["a"]), lambda name, code, s: told.append((name, code, s))) == [0]
    assert told == [("gpu0", 0, 3.5)]  # the container's own time, though it had ended before the wait began


def test_repro_dry_run_has_no_placeholder_and_pins_no_core_this_machine_lacks(vault, demo_catalog, tmp_path,
                                                                               monkeypatch):  # fmt: skip
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)  # a 2-core machine
    result = vault("--catalog", str(demo_catalog), "repro", "014", "--dry-run", "--standin", "--out",
                   str(tmp_path / "runs"))  # fmt: skip
    assert result.code == 0, result.err
    assert "{gpu}" not in result.out and "8 (one GPU each)" in result.out
    assert "cores 0-23" not in result.out
    assert "the recipe pins cores 0-191; this machine has 2: not pinned" in result.out
