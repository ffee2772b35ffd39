"""Demo part: small real env archives in 015 (Nebius: envs/NAME under the miniforge root, and one whole
miniforge tree holding its base and two envs) and one in 017 (RunPod, env-NAME.tar.zst with its RESTORE.md), and
the `vault restore env` journeys over them.

The envs are real: `python -m venv --copies` of the running python, a console script, byte-code compiled at
the recorded prefix, a binary padded with NULs to a conda placeholder's length, and conda-meta records in
conda's format. They are built in a temp folder and written as if they had lived at the lab's prefixes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import py_compile
import subprocess
import sys
import tempfile
from pathlib import Path

NEBIUS = "015_nebius_h8_raw_mirror"
RUNPOD = "017_runpod_pro6000_workspace_mirror"
NEBIUS_ROOT = "/mnt/filesystem-h8/miniforge3"
RUNPOD_ROOT = "/workspace/env"
# conda builds packages at a 255-byte placeholder prefix and pads installed binaries to that length with NULs
PLACEHOLDER = ("/home/conda/feedstock_root/build_artifacts/vault-padded_1758758400/_h_env" + "_placehold" * 30)[:255]
HELLO = "vaultdemo_hello"
RESTORE_MD = """# Restore (RunPod envs)

Each env-NAME.tar.zst is a tar of /workspace/env/NAME, made from /workspace/env:

    zstd -d env-NAME.tar.zst            # zstd -d first
    tar -C /workspace/env -xf env-NAME.tar

Or, from the vault catalog: `vault restore env runpod NAME` (add `--prefix` to put it elsewhere).
"""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_venv(build: Path, prefix: str) -> None:
    """A venv (real copies of the python binary) at build, its text files saying prefix as if it lived there."""
    subprocess.run([sys.executable, "-P", "-m", "venv", "--copies", "--without-pip", str(build)], check=True)
    if str(build) == prefix:
        return
    for path in [*build.glob("bin/activate*"), *build.glob("bin/Activate*"), build / "pyvenv.cfg"]:
        if path.is_file():
            path.write_bytes(path.read_bytes().replace(os.fsencode(build), prefix.encode()))


def add_hello(build: Path, prefix: str) -> None:
    """A pip-style package with a console script (#! at the prefix), byte-code compiled at the prefix, a RECORD."""
    site = next(build.glob("lib/python*/site-packages"))
    package = site / HELLO
    package.mkdir()
    (package / "__init__.py").write_text(
        "import sys\n\n\ndef main():\n    print(f'hello from {sys.prefix}')\n    return 0\n"
    )
    rel_site = site.relative_to(build).as_posix()
    from cloudvault.demo.build import MTIME

    os.utime(package / "__init__.py", (MTIME, MTIME))  # the byte-code records it: a rebuilt demo is the same bytes
    py_compile.compile(str(package / "__init__.py"), dfile=f"{prefix}/{rel_site}/{HELLO}/__init__.py", doraise=True)
    script = build / "bin/vault-demo-hello"
    script.write_text(f"#!{prefix}/bin/python\nimport sys\nfrom {HELLO} import main\n\nsys.exit(main())\n")
    script.chmod(0o755)
    info = site / f"{HELLO}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {HELLO}\nVersion: 1.0\n")
    files = [package / "__init__.py", info / "METADATA", script]
    rows = []
    for f in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(f.read_bytes()).digest()).rstrip(b"=").decode()
        rows.append(f"{os.path.relpath(f, site)},sha256={digest},{f.stat().st_size}")
    (info / "RECORD").write_text("\n".join(rows + [f"{HELLO}-1.0.dist-info/RECORD,,"]) + "\n")


def add_padded(build: Path, prefix: str) -> dict:
    """A conda-installed binary and text file holding the prefix, as conda leaves them; their paths_data."""
    lib = build / "lib/libvaultpad.so"
    body = b"\x7fVPD\x00\x01\x02\x03"
    lib.write_bytes(body + prefix.encode() + b"/lib/vaultpad\0" + b"\0" * (len(PLACEHOLDER) - len(prefix)) + b"\x04end")
    packaged = body + PLACEHOLDER.encode() + b"/lib/vaultpad\0\x04end"
    conf = build / "etc/vaultpad/paths.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(f"data_dir = {prefix}/share/vaultpad\n")
    paths = []
    for path, mode, original in (
        (lib, "binary", packaged),
        (conf, "text", f"data_dir = {PLACEHOLDER}/share/vaultpad\n".encode()),
    ):
        paths.append({"_path": path.relative_to(build).as_posix(), "path_type": "hardlink", "file_mode": mode,
                      "prefix_placeholder": PLACEHOLDER, "sha256": hashlib.sha256(original).hexdigest(),
                      "sha256_in_prefix": _sha256(path), "size_in_bytes": path.stat().st_size})  # fmt: skip
    return {"name": "vault-padded", "version": "1.0", "build": "h0_0", "paths": paths}


def write_conda_meta(build: Path, root: str, packages: list[dict]) -> None:
    """conda-meta/<name>-<version>-<build>.json per package (files, paths_data) and a history file."""
    meta = build / "conda-meta"
    meta.mkdir(exist_ok=True)
    for pkg in packages:
        stem = f"{pkg['name']}-{pkg['version']}-{pkg['build']}"
        doc = {"name": pkg["name"], "version": pkg["version"], "build": pkg["build"], "channel": "conda-forge",
               "extracted_package_dir": f"{root}/pkgs/{stem}", "files": [p["_path"] for p in pkg["paths"]],
               "paths_data": {"paths_version": 1, "paths": pkg["paths"]}}  # fmt: skip
        (meta / f"{stem}.json").write_text(json.dumps(doc, indent=2))
    (meta / "history").write_text(f"==> 2026-09-17 10:02:11 <==\n# cmd: {root}/bin/conda create -n {build.name}\n")


def python_package(build: Path) -> dict:
    """The interpreter files as conda-meta's python record lists them (no prefix inside: no placeholder)."""
    version = ".".join(map(str, sys.version_info[:3]))
    paths = [{"_path": p.relative_to(build).as_posix(), "path_type": "hardlink", "sha256": _sha256(p),
              "sha256_in_prefix": _sha256(p), "size_in_bytes": p.stat().st_size}
             for p in sorted(build.glob("bin/python*")) if p.is_file() and not p.is_symlink()]  # fmt: skip
    return {"name": "python", "version": version, "build": "h955ad1f_0_cpython", "paths": paths}


def add_torch_stub(build: Path) -> None:
    """What the neo env's cu121 torch leaves to read without importing it: torch/version.py and its dist-info
    (the demo carries no torch code)."""
    site = next(build.glob("lib/python*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch/version.py").write_text("__version__ = '2.3.0+cu121'\ndebug = False\ncuda = '12.1'\n")
    (site / "torch-2.3.0+cu121.dist-info").mkdir()
    (site / "torch-2.3.0+cu121.dist-info/METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.3.0+cu121\n"
    )


def make_env(build: Path, prefix: str, root: str) -> None:
    """A small real env at build that reads as if installed at prefix (root: the miniforge root it came from)."""
    make_venv(build, prefix)
    add_hello(build, prefix)
    write_conda_meta(build, root, [python_package(build), add_padded(build, prefix)])


def pack(root: Path, folder: str, out: Path) -> None:
    """GNU tar of root/folder with paths relative to root, through zstd, as the lab packed its envs (every mtime
    the demo's, so a rebuilt demo holds the same bytes under the same mtime, as a real mirror does)."""
    from cloudvault.demo.build import MTIME

    _pyc_sources_at(root / folder, MTIME)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as fh:
        tar = subprocess.Popen(
            ["tar", "--format=gnu", "-C", str(root), "--sort=name", f"--mtime=@{MTIME}", "-cf", "-", folder],
            stdout=subprocess.PIPE,
        )
        subprocess.run(["zstd", "-q", "-3", "-c"], stdin=tar.stdout, stdout=fh, check=True)
        if tar.wait() != 0:
            raise RuntimeError(f"tar failed for {root / folder}")


def _pyc_sources_at(tree: Path, mtime: int) -> None:
    """Byte-code that records its source's mtime (PEP 552, flags 0) and is valid for it records mtime instead: the
    archive gives every source that mtime, and the byte-code must stay valid for it (as the lab's was)."""
    for pyc in tree.rglob("__pycache__/*.pyc"):
        source = pyc.parent.parent / (pyc.name.split(".", 1)[0] + ".py")
        head = pyc.read_bytes()[:16]
        if len(head) < 16 or head[4:8] != bytes(4) or not source.is_file():
            continue
        st = source.stat()
        valid = (int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF) == (
            int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little"))  # fmt: skip
        if valid:
            with open(pyc, "r+b") as fh:
                fh.seek(8)
                fh.write((mtime & 0xFFFFFFFF).to_bytes(4, "little"))


TREE_ENVS = ("specdec", "probe")


def build_tree(build: Path, root: str, names: tuple[str, ...]) -> None:
    """A miniforge root as one tree: its base env (conda-meta/ at the root) and envs/NAME inside it."""
    make_env(build, root, root)
    for name in names:
        make_env(build / "envs" / name, f"{root}/envs/{name}", root)


def build(tree: Path) -> None:
    from cloudvault.demo.build import MTIME

    archives = tree / NEBIUS / "data/miniforge3_tar"
    runpod = tree / RUNPOD / "data/workspace/cs/backup/env-probe_mini.tar.zst"
    with tempfile.TemporaryDirectory(prefix="vault-demo-envs-") as tmp:
        work = Path(tmp)
        for name in ("vaultdemo", "neo"):
            make_env(work / "nebius/envs" / name, f"{NEBIUS_ROOT}/envs/{name}", NEBIUS_ROOT)
        add_torch_stub(work / "nebius/envs/neo")
        for name in ("vaultdemo", "neo"):
            pack(work / "nebius", f"envs/{name}", archives / f"{name}.tar.zst")
        build_tree(work / "tree", NEBIUS_ROOT, TREE_ENVS)
        pack(work / "tree", ".", archives / "miniforge3-tree.tar.zst")  # the whole root: base and envs/*
        make_env(work / "runpod/probe_mini", f"{RUNPOD_ROOT}/probe_mini", "/workspace/miniforge3")
        pack(work / "runpod", "probe_mini", runpod)
    (runpod.parent / "RESTORE.md").write_text(RESTORE_MD)
    for path in (*archives.glob("*.tar.zst"), runpod, runpod.parent / "RESTORE.md"):
        os.utime(path, (MTIME, MTIME))
