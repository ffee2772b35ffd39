"""Names that are not UTF-8 (a Latin-1 résumé, a shell glob expanding to one): the catalog keeps them raw, and the
raw bytes as typed find them; an argument vault cannot use is one line, never a traceback."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile

import pytest

RESUME = b"r\xe9sum\xe9.txt"


def typed(raw: bytes) -> str:
    """An argument as Python hands it over when the shell passed these bytes (PEP 383)."""
    return os.fsdecode(raw)


@pytest.fixture
def raw_mirror(tmp_path, vault):
    """A mirror with a Latin-1 file name, a Latin-1 member in an archive and a Latin-1 entry; its catalog."""
    root = tmp_path / "m"
    os.makedirs(os.path.join(bytes(root), b"exp01"))
    os.makedirs(os.path.join(bytes(root), b"\xe9tude_02"))
    with open(os.path.join(bytes(root), b"exp01", RESUME), "wb") as fh:
        fh.write(b"curriculum vitae\n")
    with open(os.path.join(bytes(root), b"\xe9tude_02", b"notes.txt"), "wb") as fh:
        fh.write(b"notes\n")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, encoding="utf-8",
                      errors="surrogateescape") as tar:  # fmt: skip
        info = tarfile.TarInfo(os.fsdecode(b"caf\xe9.csv"))
        info.size = 4
        tar.addfile(info, io.BytesIO(b"a,b\n"))
    zst = subprocess.run(["zstd", "-q", "-c"], input=buf.getvalue(), capture_output=True, check=True).stdout
    (root / "exp01/data.tar.zst").write_bytes(zst)
    db = tmp_path / "c.db"
    r = vault("--catalog", str(db), "index", "-q", str(root))
    assert r.code == 0, r.err
    return root, str(db)


@pytest.mark.parametrize(
    "argv,found",
    [
        (["extract", "exp01", typed(RESUME), "-o", "OUT"], RESUME),
        (["extract", "exp01", typed(b"caf\xe9.csv"), "-o", "OUT"], b"caf\xe9.csv"),
        (["extract", "exp01", typed(b"r\xe9*"), "-o", "OUT"], RESUME),
        (["ls", "exp01", typed(b"r\xe9*")], None),
        (["search", typed(b"r\xe9sum")], None),
        (["search", typed(b"caf\xe9")], None),
        (["show", typed(b"\xe9tude_02")], None),
        (["ls", typed(b"\xe9tude")], None),
    ],
)
def test_raw_bytes_as_typed_find_the_raw_names_the_catalog_keeps(raw_mirror, vault, tmp_path, tally, argv, found):
    _, db = raw_mirror
    out = tmp_path / "out"
    tally("hostile_input")
    r = vault("--catalog", db, *[str(out) if a == "OUT" else a for a in argv])
    tally("traceback", int("Traceback" in r.err))
    assert r.code == 0 and "Traceback" not in r.err, (argv, r.err)
    if found:
        assert os.listdir(bytes(out)) == [found]
    else:
        assert r.out.strip(), argv


def test_a_shell_glob_typed_inside_the_mirror_extracts_the_raw_name_it_expands_to(raw_mirror, tmp_path):
    root, db = raw_mirror
    out = tmp_path / "out"
    shell = f"cd {root}/exp01 && {sys.executable} -m cloudvault --catalog {db} extract exp01 r* -o {out}"
    r = subprocess.run(["bash", "-c", shell], capture_output=True)
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr
    assert os.listdir(bytes(out)) == [RESUME]
    with open(os.path.join(bytes(out), RESUME), "rb") as fh:
        assert fh.read() == b"curriculum vitae\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["extract", "exp01", typed(b"nothing\xff")],
        ["show", typed(b"\xff\xfe")],
        ["restore", "env", typed(b"rec\xe9")],
        ["repro", typed(b"rec\xe9"), "--dry-run"],
        ["--catalog", typed(b"/nonexistent/\xff.db"), "search", "x"],
    ],
)
def test_a_raw_argument_that_names_nothing_is_one_line(raw_mirror, vault, tally, argv):
    _, db = raw_mirror
    tally("bad_argument")
    r = vault("--catalog", db, *argv) if argv[0] != "--catalog" else vault(*argv)
    tally("traceback", int("Traceback" in r.err))
    assert r.code in (2, 3) and r.err.count("\n") == 1 and "Traceback" not in r.err, (argv, r.err)
