"""No byte leaves vault unverified: an archive or plain file replaced after indexing (same size, mtime kept with
`touch -r`, one byte changed) is caught piece by piece, before any byte of the changed piece is handed out, by
extract to stdout and to a folder. The archives are made by zstd, pzstd and a seekable writer, the damage put in
their first, middle and last frame."""

from __future__ import annotations

import io
import json
import random
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import require

from tests.pieces_oracle import blob_length

PIECE = 1 << 20
BIG = 16 << 20  # three pzstd frames, four seekable ones
FLIPS = {"first": PIECE // 2 + 3, "middle": BIG // 2 + 5, "last": BIG - 7}


def big_bytes(seed: int = 41) -> bytes:
    """Incompressible: zstd stores it as raw blocks, so a changed byte keeps the compressed size."""
    return random.Random(seed).randbytes(BIG)


def tar_of(members: tuple[tuple[str, bytes], ...], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    """A tar (tarfile) of these (name, data) members, each 0644 with one fixed mtime."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def tar_bytes(big: bytes) -> bytes:
    return tar_of((("notes.txt", b"small member\n"), ("big.bin", big)))


def compressed(raw: bytes, how: str, work: Path) -> bytes:
    """raw compressed by zstd (one frame), pzstd (several) or the seekable writer (independent 4 MiB frames)."""
    if how == "seekable":
        from cloudvault.archive.seekable import SeekableWriter

        out = io.BytesIO()
        writer = SeekableWriter(out)
        writer.write(raw)
        writer.close()
        return out.getvalue()
    tool = {"zstd": ["zstd", "-q", "-c"], "pzstd": ["pzstd", "-q", "-p", "2", "-c"]}[how]
    require(tool[0])
    src = work / "in.tar"
    src.write_bytes(raw)
    with open(src, "rb") as fh:
        return subprocess.run(tool, stdin=fh, capture_output=True, check=True).stdout


def flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1 :]


def replace_keeping_mtime(path: Path, data: bytes) -> None:
    """As a re-sync of a corrupted copy does: same size, new bytes, the old mtime put back (touch -r)."""
    assert len(data) == path.stat().st_size, "the replacement must keep the size"
    keep = path.with_name(path.name + ".mtime")
    shutil.copy2(path, keep)
    path.write_bytes(data)
    subprocess.run(["touch", "-r", str(keep), str(path)], check=True)
    keep.unlink()


@pytest.fixture
def damaged(tmp_path, vault):
    """make(how, where) -> (catalog, the good bytes of big.bin, the flipped offset): an archive indexed, then
    replaced by one whose big.bin has one byte changed at where (first, middle or last frame)."""

    def make(how: str, where: str):
        entry = tmp_path / "m/101_pieces"
        entry.mkdir(parents=True)
        big = big_bytes()
        archive = entry / "data.tar.zst"
        archive.write_bytes(compressed(tar_bytes(big), how, tmp_path))
        db = str(tmp_path / "c.db")
        r = vault("--catalog", db, "index", "-q", str(tmp_path / "m"))
        assert r.code == 0, r.err
        at = FLIPS[where]
        replace_keeping_mtime(archive, compressed(tar_bytes(flipped(big, at)), how, tmp_path))
        return db, big, at

    return make


def extract_stdout(db: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cloudvault", "--catalog", db, "extract", *args, "-o", "-"],
                          capture_output=True, timeout=120)  # fmt: skip


@pytest.mark.parametrize("where", list(FLIPS))
@pytest.mark.parametrize("how", ["zstd", "pzstd", "seekable"])
def test_stdout_hands_out_only_the_pieces_before_a_changed_byte(damaged, how, where, tally):
    db, big, at = damaged(how, where)
    tally("corruption")
    r = extract_stdout(db, "101", "big.bin")
    err = r.stderr.decode()
    assert r.returncode == 5, err
    good = at // PIECE * PIECE  # the pieces before the changed one verify; nothing of it or after goes out
    assert len(r.stdout) == good, f"{len(r.stdout)} bytes out, {good} verified"
    assert r.stdout == big[:good]
    assert "big.bin" in err and f"offset {good}" in err and "Traceback" not in err


@pytest.mark.parametrize("how", ["zstd", "pzstd"])
def test_extract_to_a_folder_writes_nothing_of_a_changed_member(damaged, how, tmp_path, vault, tally):
    db, big, at = damaged(how, "middle")
    tally("corruption")
    out = tmp_path / "out"
    r = vault("--catalog", db, "extract", "101", "big.bin", "-o", str(out))
    assert r.code == 5 and f"offset {at // PIECE * PIECE}" in r.err, r.err
    assert list(out.iterdir()) == []  # no file, no temp


def spy_atomic_writes(monkeypatch, module: str) -> list[int]:
    """The size of the temp file after each write made through module's atomic_write."""
    import contextlib

    from cloudvault import atomic

    sizes: list[int] = []

    @contextlib.contextmanager
    def spying(path, **kw):
        with atomic.atomic_write(path, **kw) as fh:
            write = fh.write

            def counted(data):
                sizes.append(fh.tell() + len(data))
                return write(data)

            fh.write = counted
            yield fh

    monkeypatch.setattr(f"{module}.atomic_write", spying)
    return sizes


def test_a_temp_never_holds_a_byte_of_an_unverified_piece(damaged, tmp_path, monkeypatch, vault):
    """While extract writes its temp, every byte written so far is in pieces that verified."""
    db, big, at = damaged("zstd", "middle")
    seen = spy_atomic_writes(monkeypatch, "cloudvault.extract")
    r = vault("--catalog", db, "extract", "101", "big.bin", "-o", str(tmp_path / "out"))
    assert r.code == 5
    assert seen and max(seen) <= at // PIECE * PIECE, f"{max(seen)} bytes written, {at // PIECE * PIECE} verified"


def test_repro_input_staging_writes_only_verified_pieces(damaged, tmp_path, monkeypatch):
    """A run's inputs are staged through the member reader: the temp of a changed input holds only the pieces
    before the change, and the input never lands."""
    from types import SimpleNamespace

    from cloudvault.catalog.db import open_catalog
    from cloudvault.errors import IntegrityError
    from cloudvault.extract import find_targets
    from cloudvault.progress import Progress
    from cloudvault.repro.run import stage_inputs

    db, big, at = damaged("pzstd", "middle")
    conn = open_catalog(db)
    (member,) = find_targets(conn, 1, "101_pieces", "big.bin")
    dest = tmp_path / "run/inputs/big.bin"
    staged = SimpleNamespace(dest=dest, single=True, name="weights", members=[member], base="")
    plan = SimpleNamespace(inputs=[staged], recipe=SimpleNamespace(section=lambda name: {}), run_dir=tmp_path / "run")
    seen = spy_atomic_writes(monkeypatch, "cloudvault.io.landing")
    with pytest.raises(IntegrityError) as refused:
        stage_inputs(conn, plan, Progress())
    conn.close()
    assert seen and max(seen) <= at // PIECE * PIECE, f"{max(seen)} bytes written, {at // PIECE * PIECE} verified"
    assert f"offset {at // PIECE * PIECE}" in refused.value.message
    assert not dest.exists() and list(dest.parent.iterdir()) == []


@pytest.mark.parametrize("where", list(FLIPS))
def test_a_plain_file_replaced_with_its_mtime_kept_is_caught_at_its_piece(tmp_path, vault, where, tally):
    entry = tmp_path / "m/101_pieces"
    entry.mkdir(parents=True)
    big = big_bytes(7)
    plain = entry / "weights.bin"
    plain.write_bytes(big)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(tmp_path / "m")).code == 0
    at = FLIPS[where]
    replace_keeping_mtime(plain, flipped(big, at))
    tally("corruption")
    r = extract_stdout(db, "101", "weights.bin")
    good = at // PIECE * PIECE
    assert r.returncode == 5 and r.stdout == big[:good], (len(r.stdout), good, r.stderr.decode())
    assert f"offset {good}" in r.stderr.decode()
    out = tmp_path / "out"
    r2 = vault("--catalog", db, "extract", "101", "weights.bin", "-o", str(out))
    assert r2.code == 5 and list(out.iterdir()) == []


def as_version_4(db: str) -> None:
    """The catalog as schema 4 left it (no piece hashes, no generations), then opened by this vault: migrated by
    steps 5 and 6."""
    from cloudvault.catalog.db import open_catalog

    conn = sqlite3.connect(db)
    conn.executescript("DROP TABLE seek_points; ALTER TABLE archives DROP COLUMN format; "
                       "DROP TABLE generation_events; DROP TABLE member_history; DROP TABLE file_history; "
                       "DROP TABLE generations; ALTER TABLE files DROP COLUMN generation; "
                       "ALTER TABLE members DROP COLUMN pieces; ALTER TABLE files DROP COLUMN pieces;"
                       "UPDATE meta SET value = '4' WHERE key = 'schema_version';")  # fmt: skip
    conn.close()
    open_catalog(db).close()


def test_a_member_indexed_before_piece_hashes_is_withheld_until_its_whole_hash_matches(damaged, tally):
    """A catalog from before schema 5 has no pieces: nothing of the changed member goes out, not even the bytes
    before the change."""
    db, big, at = damaged("pzstd", "last")
    as_version_4(db)
    tally("corruption")
    r = extract_stdout(db, "101", "big.bin")
    assert r.returncode == 5 and r.stdout == b"" and "BLAKE3 mismatch" in r.stderr.decode()
    assert extract_stdout(db, "101", "notes.txt").stdout == b"small member\n"  # one piece: its hash is the whole's


def test_an_old_catalog_s_objects_get_pieces_at_the_next_index_and_read_whole_before(tmp_path, vault):
    entry = tmp_path / "m/101_pieces"
    entry.mkdir(parents=True)
    big = big_bytes()
    (entry / "data.tar.zst").write_bytes(compressed(tar_bytes(big), "zstd", tmp_path))
    (entry / "weights.bin").write_bytes(big)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(tmp_path / "m")).code == 0
    as_version_4(db)
    for name in ("big.bin", "weights.bin"):  # no pieces: withheld whole, then handed out after the whole hash
        r = extract_stdout(db, "101", name)
        assert r.returncode == 0 and r.stdout == big
        assert "indexed without piece hashes" in r.stderr.decode() and "`vault index`" in r.stderr.decode()
    again = vault("--catalog", db, "index", "--json", str(tmp_path / "m"))
    assert json.loads(again.out)["files_read"] == 2  # both re-read to record their pieces
    conn = sqlite3.connect(db)
    for table, path in (("members", "big.bin"), ("files", "%weights.bin")):
        sql = f"SELECT length(pieces) FROM {table} WHERE path LIKE ?"
        assert conn.execute(sql, (path,)).fetchone()[0] == blob_length(16)
    conn.close()


def env_tar(big: bytes) -> bytes:
    return tar_of((("envs/lab/conda-meta/x.json", b"{}"), ("envs/lab/lib/weights.bin", big)), tarfile.GNU_FORMAT)


@pytest.mark.parametrize("old_catalog", [False, True])
@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("how", ["zstd", "pzstd"])
def test_env_staging_never_holds_a_byte_of_a_changed_piece(tmp_path, vault, monkeypatch, how, parallel, old_catalog,
                                                           tally):  # fmt: skip
    """Restore env (the parallel writers and the member reader alike) writes a file's bytes into staging only in
    pieces that verified: the changed env archive is refused, naming the offset, with the bytes before it only.
    From a catalog without piece hashes, nothing of the file is staged: it is held back whole, then refused."""
    from cloudvault.restore.env import bulk as env_bulk

    big = big_bytes(3)
    archive = tmp_path / "m/015_x/data/lab.tar.zst"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(compressed(env_tar(big), how, tmp_path))
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(tmp_path / "m")).code == 0
    if old_catalog:
        as_version_4(db)
    at = FLIPS["middle"]
    replace_keeping_mtime(archive, compressed(env_tar(flipped(big, at)), how, tmp_path))
    (tmp_path / "r/env").mkdir(parents=True)
    (tmp_path / "r/env/lab.toml").write_text('entry = "015"\narchives = "data/*.tar.zst"\nroot = "/opt/lab"\n')
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "r"))
    monkeypatch.setattr(env_bulk, "can_stage_in_parallel", lambda members: parallel)
    written = spy_writes_to(monkeypatch, "weights.bin")
    tally("corruption")
    r = vault("--catalog", db, "restore", "env", "lab", "lab", "--prefix", str(tmp_path / "out/lab"))
    good = at // PIECE * PIECE
    assert r.code == 5, r.err
    if old_catalog:
        assert sum(written) == 0 and "BLAKE3 mismatch" in r.err, (sum(written), r.err)
        return
    assert 0 < sum(written) <= good, f"{sum(written)} bytes staged, {good} verified"
    assert f"offset {good}" in r.err, r.err
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []  # no env, no staging left


def spy_writes_to(monkeypatch, name: str) -> list[int]:
    """The sizes of every write into a file called name, through os.write or a file opened by os.fdopen."""
    import os

    sizes: list[int] = []
    real_write, real_fdopen = os.write, os.fdopen

    def named(fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").endswith(name)
        except OSError:
            return False

    def write(fd, data):
        n = real_write(fd, data)
        if named(fd):
            sizes.append(n)
        return n

    def fdopen(fd, *args, **kw):
        fh = real_fdopen(fd, *args, **kw)
        if named(fd) and "w" in (args[0] if args else kw.get("mode", "r")):
            raw_write = fh.write

            def counted(data):
                sizes.append(len(data))
                return raw_write(data)

            fh.write = counted
        return fh

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fdopen", fdopen)
    return sizes
