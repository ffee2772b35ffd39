"""Real, runnable test envs for `vault restore env`, packed as the lab packed them, in a small indexed mirror.

No conda channel is reachable here, so the envs are `python -m venv --copies` at a long prefix under a miniforge
root, with real wheels pip-installed (charset-normalizer: a console script and mypyc-compiled extensions;
markupsafe: a C speedups module), conda-meta records in conda's format (a binary NUL-padded to a 255-byte conda
placeholder, a text file with the prefix), and, where gcc exists, an ELF program whose RUNPATH is under the
prefix. `neo` is small and carries a cu121 torch's metadata and a binary holding the prefix with no padding.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cloudvault.demo.envs import (
    add_hello,
    add_padded,
    add_torch_stub,
    make_env,
    pack,
    python_package,
    write_conda_meta,
)

ENTRY = "015_nebius_h8_raw_mirror"
ARCHIVES = "data/miniforge3_tar"
WHEELS = ("charset-normalizer", "markupsafe")
HELLO_C = "int vault_hello(void) { return 42; }\n"
MAIN_C = '#include <stdio.h>\nint vault_hello(void);\nint main(void) { printf("%d\\n", vault_hello()); return 0; }\n'


@dataclass
class Lab:
    """The packed envs: where they lived, the mirror holding their archives, and a recipe naming them."""

    root: Path  # the miniforge root the archives were packed from (now empty: the envs are gone)
    mirror: Path
    recipes: Path  # VAULT_RECIPES
    has_elf: bool

    def prefix(self, env: str) -> Path:
        return self.root / "envs" / env

    def archive(self, env: str) -> Path:
        return self.mirror / ENTRY / ARCHIVES / f"{env}.tar.zst"


def _run(cmd: list[str], **kw) -> None:
    subprocess.run(cmd, check=True, capture_output=True, **kw)


def build_sparsespec(prefix: Path) -> bool:
    """The full env: venv with pip, real wheels, hello, conda-meta, and an ELF with a RUNPATH (when gcc exists)."""
    _run([sys.executable, "-m", "venv", "--copies", str(prefix)])
    pip = [str(prefix / "bin/python"), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check"]
    _run([*pip, *WHEELS], timeout=300)
    add_hello(prefix, str(prefix))
    write_conda_meta(prefix, str(prefix.parent.parent), [python_package(prefix), add_padded(prefix, str(prefix))])
    (prefix / "lib/libvaultpad.so").chmod(0o444)  # read-only, as some packages install their libraries
    if shutil.which("gcc") is None:
        return False
    (prefix / "src").mkdir()
    (prefix / "src/hello.c").write_text(HELLO_C)
    (prefix / "src/main.c").write_text(MAIN_C)
    _run(["gcc", "-shared", "-fPIC", "-o", str(prefix / "lib/libvaulthello.so"), str(prefix / "src/hello.c")])
    _run(
        [
            "gcc",
            "-o",
            str(prefix / "bin/vault-rpath-hello"),
            str(prefix / "src/main.c"),
            f"-L{prefix}/lib",
            "-lvaulthello",
            f"-Wl,-rpath,{prefix}/lib",
            "-Wl,--enable-new-dtags",
        ]
    )
    return True


def build_neo(prefix: Path) -> None:
    """A small env with a cu121 torch's metadata (no torch code) and a binary that holds the prefix unpadded."""
    make_env(prefix, str(prefix), str(prefix.parent.parent))
    add_torch_stub(prefix)
    with open(prefix / "etc/vaultpad/paths.conf", "a") as fh:  # edited after conda installed it
        fh.write("cache = 1\n")
    (prefix / "lib/libnopad.bin").write_bytes(b"\x00\x01" + str(prefix).encode() + b"/share\x00\x02\x03")


def build_lab(base: Path) -> Lab:
    """Build, pack and remove the envs; the mirror and a recipe (`lab`) for them. Indexing is the caller's."""
    root = base / "mnt" / ("filesystem-h8-" + "p" * 24) / "miniforge3"
    mirror = base / "mirror"
    has_elf = build_sparsespec(root / "envs/sparsespec")
    build_neo(root / "envs/neo")
    for env in ("sparsespec", "neo"):
        pack(root, f"envs/{env}", mirror / ENTRY / ARCHIVES / f"{env}.tar.zst")
    shutil.rmtree(root / "envs")
    recipes = base / "recipes"
    (recipes / "env").mkdir(parents=True)
    (recipes / "env/lab.toml").write_text(RECIPE.format(root=root))
    return Lab(root, mirror, recipes, has_elf)


RECIPE = """description = "test envs"
entry = "015"
archives = "data/miniforge3_tar/*.tar.zst"
root = "{root}"
pitfalls = ["a lab pitfall"]

[checks]
hello = "vault-demo-hello"

[envs.sparsespec.checks]
console-script = "normalizer --version"
compiled-extension = "python -c 'import charset_normalizer.md, markupsafe._speedups'"
pip-list = "python -m pip list"

[envs.neo]
pitfalls = ["torch is a cu121 build"]
"""
