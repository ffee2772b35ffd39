"""Start-up of the commands users run most (issue 38: extract within 1.4x of the import floor, show and ls within
1.3x): measured by bench/startup.py; here, that they load none of the modules that cost milliseconds and that they
never use. Run as a plain install runs (no site hooks: an editable install's finder imports pathlib for everyone)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

import cloudvault

SOURCE = str(Path(cloudvault.__file__).parent.parent)
COSTLY = ("pathlib", "urllib.parse", "dataclasses", "inspect", "ast", "ipaddress", "queue", "threading", "ctypes")


def loaded_by(args: list[str], costly: tuple[str, ...] = COSTLY) -> str:
    """The COSTLY modules loaded by a whole `vault ARGS` run, in an interpreter without site hooks."""
    paths = [SOURCE, *site.getsitepackages()]
    code = (
        f"import sys; sys.path[:0] = {paths!r}; from cloudvault.cli.main import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        f"print('LOADED', sorted(set({costly!r}) & set(sys.modules)))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env)
    assert "LOADED" in out.stdout, out.stderr[-2000:]
    return out.stdout.rsplit("LOADED", 1)[1].strip()


# what each command must not load beyond COSTLY: json is only for sparse members (extract) and for show's settings
# and records; bz2, lzma and zlib only for telling a .gz/.bz2/.xz archive's format (index) and for reading one; the
# shared models (members, frames, file stats) and the atomic writer only where bytes are read or written; a small
# member's extract needs neither the sparse maps' reader, nor the native piece hasher (a member of one piece is
# checked by its whole BLAKE3), nor the migrations of a catalog already at the current schema (~0.4 ms together)
DECOMPRESSORS = ("bz2", "lzma", "zlib", "_compression")
BYTE_PATH = ("cloudvault.models", "cloudvault.atomic")
SMALL_MEMBER = ("cloudvault.archive.sparse", "cloudvault._b3tree", "cloudvault.catalog.migrations")
NOT_USED = {"show": (*DECOMPRESSORS, *BYTE_PATH), "ls": ("json", "cloudvault.catalog.records", *DECOMPRESSORS,
            *BYTE_PATH), "extract": ("json", *DECOMPRESSORS, *SMALL_MEMBER)}  # fmt: skip


@pytest.mark.parametrize("command", [["show", "014"], ["ls", "018"], ["extract", "018", "compaction_meta.json"]])
def test_show_ls_and_extract_load_no_module_they_do_not_use(demo_catalog, tmp_path, command):
    costly = (*COSTLY, *NOT_USED[command[0]])
    if command[0] == "extract":
        command = [*command, "-o", str(tmp_path)]
    assert loaded_by(["--catalog", str(demo_catalog), *command], costly) == "[]"


def ended(db: Path, args: list[str], before: str = "") -> subprocess.CompletedProcess:
    """`vault ARGS` through console_main, as the console script runs it, in a process holding an object that says
    on stderr when the interpreter frees it (its teardown); before: code run first (an exit handler registered)."""
    code = (
        # what vault itself leaves at exit: a site's .pth may register a handler of its own at start-up (a CA bundle's
        # clean-up, here), which the interpreter would rightly run, so the probe starts from none
        "import atexit; atexit._clear()\n"
        "import builtins, os, sys\n"
        "class Probe:\n"
        "    def __del__(self, write=os.write):\n"
        "        write(2, b'torn down\\n')\n"
        f"builtins.probe = Probe()\n{before}\n"
        f"sys.argv = ['vault', '--catalog', {str(db)!r}, *{args!r}]\n"
        "from cloudvault.cli.main import console_main\nconsole_main()\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_a_command_ends_its_process_without_tearing_the_interpreter_down(demo_catalog):
    """Nothing registered to run at exit and no thread started: the output is flushed and the process ends at once,
    its exit code the command's; the interpreter does not free every object first (~1 ms of a small extract)."""
    done = ended(demo_catalog, ["show", "014"])
    assert done.returncode == 0 and done.stdout.startswith("014_") and done.stdout.endswith("\n"), done.stderr
    assert "torn down" not in done.stderr
    missing = ended(demo_catalog, ["show", "999"])
    assert missing.returncode == 3 and missing.stderr.startswith("vault: error: ") and "torn down" not in missing.stderr


def test_an_exit_handler_still_runs_and_the_interpreter_ends_as_usual(demo_catalog):
    done = ended(demo_catalog, ["ls", "018"], before="import atexit; atexit.register(print, 'handler ran')")
    assert done.returncode == 0 and done.stdout.endswith("handler ran\n") and "torn down" in done.stderr
