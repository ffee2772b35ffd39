"""The native parts are optional: `pip install .` where no C compiler works builds a wheel without
cloudvault._b3tree and cloudvault._plainruns, and that install hashes pieces in two passes and still checks a catalog's
one-pass pieces (with numpy), refusing a changed piece as the extension does, and hashes small members one `blake3`
call each, to the same digests. With a compiler, the wheel holds both extensions, built from the sdist too (which
ships the header they share)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def source(tmp_path: Path) -> Path:
    """The tree as a fresh clone has it: no build output (an extension built in place would be taken as data)."""
    tree = tmp_path / "src"
    if not tree.exists():
        junk = shutil.ignore_patterns("*.so", "build", ".venv", "__pycache__", "*.egg-info", ".git", ".*_cache",
                                      ".hypothesis", "bench")  # fmt: skip
        shutil.copytree(ROOT, tree, ignore=junk)
    return tree


def sdist(tmp_path: Path) -> Path:
    """The sdist of the tree, made by setuptools' PEP 517 hook (what `python -m build --sdist` calls)."""
    out = tmp_path / "sdist"
    hook = f"import setuptools.build_meta as b; print(b.build_sdist({str(out)!r}))"
    r = subprocess.run([sys.executable, "-c", hook], cwd=source(tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out / r.stdout.split()[-1]


def wheel(tmp_path: Path, name: str, cc: str | None, tree: Path | None = None) -> Path:
    out = tmp_path / name
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "LDSHARED")}
    if cc:
        env["CC"] = env["LDSHARED"] = cc
    argv = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out)]  # setuptools as pyproject asks
    r = subprocess.run([*argv, str(tree or source(tmp_path))], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    (built,) = out.glob("cloudvault-*.whl")
    return built


def native_in(built: Path) -> list[str]:
    return [n for n in zipfile.ZipFile(built).namelist()
            if n.startswith(("cloudvault/_b3tree", "cloudvault/_plainruns")) and n.endswith(".so")]  # fmt: skip


CHECK = """
import blake3, sys
from cloudvault import b3subtree, pieces
from cloudvault.errors import PieceMismatch
from cloudvault.io.members import PieceCheck, PieceGate
assert pieces._b3tree is None and not pieces.ONE_PASS, pieces.__file__
data = bytes(range(251)) * 20000  # 4.8 MiB: five pieces
h = pieces.PieceHasher(); h.update(data)
assert h.hexdigest() == blake3.blake3(data).hexdigest()
assert h.pieces() == b"".join(blake3.blake3(data[i:i + 2**20]).digest(16) for i in range(0, len(data), 2**20))
one_pass = pieces.TREE + b"".join(v[:16] for v in b3subtree.values_of(data))
for blob in (h.pieces(), one_pass):
    for changed in (False, True):
        got = bytearray(data)
        if changed:
            got[3 * 2**20 + 1] ^= 1
        gate, out = PieceGate(PieceCheck("x", len(data), blake3.blake3(data).hexdigest(), blob)), []
        try:
            out += gate.feed(bytes(got)); gate.end()
        except PieceMismatch as exc:
            assert changed and exc.fields["offset"] == 3 * 2**20 and b"".join(out) == data[:3 * 2**20]
        else:
            assert not changed and b"".join(out) == data
from cloudvault import hashing  # small members hashed one `blake3` call each, the same digests
assert hashing._plainruns is None
sizes = [0, 1, 1024, 1025, 70000]
assert hashing.member_hex_digests(data, [0, 7, 9, 11, 13], sizes, 5, 65536) == [
    blake3.blake3(data[at + 5 : at + 5 + n]).hexdigest() for at, n in zip([0, 7, 9, 11], sizes)] + [None]
print("ok")
"""


def test_without_a_compiler_the_wheel_builds_and_its_install_hashes_and_checks_pieces(tmp_path):
    built = wheel(tmp_path, "nocc", "/bin/false")
    assert native_in(built) == []
    site = tmp_path / "site"
    zipfile.ZipFile(built).extractall(site)
    # -S: no site, so no .pth runs (an editable install of the tree would put its own cloudvault first); the
    # site-packages folders are still on the path, after the wheel's, for blake3 and numpy
    path = os.pathsep.join([str(site), *(p for p in sys.path if p.endswith("site-packages"))])
    r = subprocess.run([sys.executable, "-S", "-c", CHECK], cwd=tmp_path, env={**os.environ, "PYTHONPATH": path},
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_with_a_compiler_the_wheel_built_from_the_sdist_holds_both_extensions(tmp_path):
    if subprocess.run(["sh", "-c", "command -v cc || command -v gcc"], capture_output=True).returncode:
        if os.environ.get("CI") == "true":
            pytest.fail("a C compiler is required in CI but is not installed")
        pytest.skip("no C compiler")
    made = sdist(tmp_path)
    with tarfile.open(made) as tar:  # the compression core both extensions include
        assert f"{made.name.removesuffix('.tar.gz')}/cloudvault/_b3core.h" in tar.getnames()
    assert len(native_in(wheel(tmp_path, "cc", None, made))) == 2  # _b3tree and _plainruns
