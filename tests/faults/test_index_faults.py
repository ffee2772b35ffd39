"""The indexer, verify and optimize under faults and hostile input: nothing lost, nothing leaked, one line each."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
from pathlib import Path

import pytest
from archives import compress, gnu_tar, hostile_archive
from conftest import require

HF = "hf_" + "Q7" * 17  # looks like a Hugging Face token to the default rules
GITHUB_PAT = "github_pat_" + "Z9" * 25


def _plain_mirror(root: Path, n: int = 4) -> Path:
    (root / "001_x").mkdir(parents=True)
    for i in range(n):
        (root / f"001_x/f{i}.txt").write_text(f"file {i}\n")
    return root


def _rows(db: Path) -> int:
    return sqlite3.connect(db).execute("SELECT count(*) FROM files").fetchone()[0]


def _one_line(err: str) -> bool:
    return err.count("\n") == 1 and "Traceback" not in err


def test_a_vanished_root_is_refused_unless_prune(tmp_path, vault, tally):
    tally("corruption")
    mirror = _plain_mirror(tmp_path / "m")
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(mirror)).code == 0
    mirror.rename(tmp_path / "unmounted")
    for argv in ([], [str(mirror)]):  # the known roots, or the root by name
        r = vault("--catalog", db, "index", "-q", *argv)
        tally("rows_lost", 4 - _rows(Path(db)))
        assert r.code == 6 and _one_line(r.err) and "missing" in r.err and "--prune" in r.err
        assert _rows(Path(db)) == 4
    r = vault("--catalog", db, "index", "--json", "--prune")
    assert r.code == 0 and json.loads(r.out)["files_deleted"] == 4 and _rows(Path(db)) == 0


def test_a_definition_given_for_another_folder_makes_a_second_mirror_and_keeps_the_first(tmp_path, vault, tally):
    """A mirror is its root: `--mirror marvell_cloud` on another folder is that folder's own mirror (a unique
    display name), never the first one re-pointed and then taken for emptied."""
    tally("bad_argument")
    mirror = _plain_mirror(tmp_path / "m")
    other = _plain_mirror(tmp_path / "other", 1)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", "--mirror", "marvell_cloud", str(mirror)).code == 0
    r = vault("--catalog", db, "index", "-q", "--mirror", "marvell_cloud", str(other))
    conn = sqlite3.connect(db)
    first = conn.execute("SELECT count(*) FROM files f JOIN mirrors m ON m.id = f.mirror_id WHERE m.root = ?",
                         (str(mirror),)).fetchone()[0]  # fmt: skip
    tally("rows_lost", 4 - first)
    assert r.code == 0, r.err
    assert conn.execute("SELECT name, root FROM mirrors ORDER BY id").fetchall() == [
        ("marvell_cloud", str(mirror)), ("marvell_cloud-2", str(other))] and first == 4  # fmt: skip


def test_an_emptied_or_half_lost_root_is_refused_unless_prune(tmp_path, vault, tally):
    tally("corruption")
    mirror = _plain_mirror(tmp_path / "m")
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(mirror)).code == 0
    (mirror / "001_x/f0.txt").unlink()  # one of four: an ordinary deletion
    assert vault("--catalog", db, "index", "-q", str(mirror)).code == 0 and _rows(Path(db)) == 3
    for name in ("f1.txt", "f2.txt"):  # two of the three left: more than half
        (mirror / "001_x" / name).unlink()
    r = vault("--catalog", db, "index", "-q", str(mirror))
    tally("rows_lost", 3 - _rows(Path(db)))
    assert r.code == 6 and _one_line(r.err) and "1 of the 3" in r.err and _rows(Path(db)) == 3
    (mirror / "001_x/f3.txt").unlink()  # empty
    r = vault("--catalog", db, "index", "-q", str(mirror))
    tally("rows_lost", 3 - _rows(Path(db)))
    assert r.code == 6 and _rows(Path(db)) == 3
    assert vault("--catalog", db, "index", "-q", "--prune", str(mirror)).code == 0 and _rows(Path(db)) == 0


def _single_frame_archive(tmp_path: Path) -> tuple[Path, Path]:
    require("zstd")
    src = tmp_path / "src"
    (src / "dumps").mkdir(parents=True)
    (src / "dumps/a.bin").write_bytes(os.urandom(6 << 20) + bytes(6 << 20))
    (src / "logs").mkdir()
    (src / "logs/env.log").write_text(f"HF_TOKEN={HF}\n")
    (tmp_path / "m/018_x").mkdir(parents=True)
    gnu_tar(src, tmp_path / "a.tar", "gnu")
    return compress(tmp_path / "a.tar", tmp_path / "m/018_x/a.tar.zst", "zstd-T0"), src


def test_optimize_removes_only_its_own_recorded_copies_and_keeps_them_private(tmp_path, vault, tally):
    tally("hostile_input")
    archive, src = _single_frame_archive(tmp_path)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(tmp_path / "m")).code == 0
    cache = tmp_path / "M"
    (cache / "seekable").mkdir(parents=True)
    foreign = [cache / "seekable/mine.tar.zst", cache / f"seekable/{'ab' * 32}.tar.zst"]
    for f in foreign:
        f.write_bytes(b"the user's own file")
    old_umask = os.umask(0)
    try:
        r = vault("--catalog", db, "optimize", "--to", str(cache), "--json")
    finally:
        os.umask(old_umask)
    assert r.code == 0, r.err
    copy = Path(json.loads(r.out)["written"][0]["copy"])
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert all(f.read_bytes() == b"the user's own file" for f in foreign)
    (src / "more.txt").write_text("a new version\n")  # the archive changes: its recorded copies are vault's to drop
    gnu_tar(src, tmp_path / "a.tar", "gnu")
    compress(tmp_path / "a.tar", archive, "zstd-T0")
    assert vault("--catalog", db, "index", "-q", str(tmp_path / "m")).code in (0, 5)
    tally("write_outside", sum(not f.exists() or f.read_bytes() != b"the user's own file" for f in foreign))
    assert not copy.exists() and all(f.exists() for f in foreign)


def test_index_optimize_copies_are_private_and_a_copy_deleted_by_hand_is_forgotten(tmp_path, vault, tally):
    tally("corruption")
    _single_frame_archive(tmp_path)
    db = str(tmp_path / "c.db")
    old_umask = os.umask(0)
    try:
        assert vault("--catalog", db, "index", "-q", "--optimize", str(tmp_path / "m")).code == 0
    finally:
        os.umask(old_umask)
    (copy,) = [r[0] for r in sqlite3.connect(db).execute("SELECT path FROM seekable")]
    cache = tmp_path / "c.db.cache"
    for private, mode in ((cache, 0o700), (cache / "seekable", 0o700), (Path(copy), 0o600)):
        assert stat.S_IMODE(private.stat().st_mode) == mode, private
    os.unlink(copy)
    stray = Path(copy).with_name("stray.tar.zst")
    stray.write_bytes(b"not vault's")
    r = json.loads(vault("--catalog", db, "optimize", "--json").out)
    assert r["forgotten"] == 1 and len(r["written"]) == 1 and stray.read_bytes() == b"not vault's"


def _secret_mirror(tmp_path: Path) -> tuple[Path, Path]:
    """Tokens in odd log names, behind a `|` rule, in member names, link targets, a listing and a file name."""
    mirror = tmp_path / "m"
    logs = mirror / "019_x/logs"
    logs.mkdir(parents=True)
    (mirror / f"020_{HF}").mkdir()  # even an entry's own name
    (mirror / f"020_{HF}/notes.txt").write_text("an entry named after the token\n")
    for name in ("train.log.1", "env.bak", "run.stdout", "job.err", "job.out", "NOTES"):
        (logs / name).write_text(f"step 1\nexport HF_TOKEN={HF}\n")
    (logs / "gh.txt").write_text("x" * 9000 + f"\ntoken: {GITHUB_PAT}\n")
    (logs / f"copy_of_{HF}.txt").write_text("a file named after the token\n")
    os.symlink(f"/secrets/{HF}", logs / "points_at_token")
    import tarfile

    archive = hostile_archive(mirror / "019_x/data/a.tar.zst", (f"keys/{HF}.txt", "ok.txt"),
                              (("tok_link", f"../{HF}", tarfile.SYMTYPE),))  # fmt: skip
    Path(str(archive) + ".list").write_text(f"./ok.txt\n./missing_{HF}.txt\n")
    definition = tmp_path / "lab.toml"
    definition.write_text(
        'name = "lab"\n[secrets]\n'
        "hf_token_assignment = 'HF_TOKEN\\s*[=:]\\s*\\S+'\nhf_token = 'hf_[A-Za-z0-9]{30,}'\n"
        "github = 'ghp_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40,}'\n"
    )
    return mirror, definition


def test_secrets_are_found_whatever_the_name_and_never_reach_the_catalog(tmp_path, vault, tally):
    tally("hostile_input")
    mirror, definition = _secret_mirror(tmp_path)
    db = tmp_path / "c.db"
    r = vault("--catalog", str(db), "index", "--json", "--mirror", str(definition), str(mirror))
    assert r.code == 5, r.err  # the listing names a path the archive lacks
    conn = sqlite3.connect(db)
    flagged = {p for (p,) in conn.execute("SELECT coalesce(fl.member, f.path) FROM flags fl JOIN files f "
                                          "ON f.id = fl.file_id WHERE fl.kind = 'secret'")}  # fmt: skip
    for name in ("train.log.1", "env.bak", "run.stdout", "job.err", "job.out", "NOTES", "gh.txt"):
        assert f"019_x/logs/{name}" in flagged, name
    assert any("copy_of_" in p for p in flagged) and any(p.startswith("keys/") for p in flagged)
    assert "019_x/logs/points_at_token" in flagged and "tok_link" in flagged  # link targets holding one
    conn.close()
    everything = b"".join(p.read_bytes() for p in tmp_path.glob("c.db*") if p.is_file())
    outputs = r.out + r.err
    for shown in ("search", "copy_of"), ("show", "019"), ("ls", "019", "--json"):
        got = vault("--catalog", str(db), *shown)
        outputs += got.out + got.err
    tally("secret_leak", sum((t.encode() in everything) + (t in outputs) for t in (HF, GITHUB_PAT)))
    for token in (HF, GITHUB_PAT):
        assert token.encode() not in everything
        assert token not in outputs
    assert b"[redacted hf_token]" in everything


def test_symlink_chains_that_climb_out_are_flagged_at_index_time(tmp_path, vault, tally):
    tally("hostile_input")
    import tarfile

    links = (("a/b/up", "..", tarfile.SYMTYPE), ("a/b/x", "up/../..", tarfile.SYMTYPE),
             ("a/b/esc", "up/../../../OUT", tarfile.SYMTYPE), ("a/b/fine", "up/b", tarfile.SYMTYPE),
             ("linkdir", "sub", tarfile.SYMTYPE))  # fmt: skip
    hostile_archive(tmp_path / "m/019_x/chains.tar.zst", ("a/b/f.txt", "sub/s.txt"), links)
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", "-q", str(tmp_path / "m"))
    assert r.code == 5 and "Traceback" not in r.err
    flagged = {m for (m,) in sqlite3.connect(db).execute("SELECT member FROM flags WHERE kind = 'unsafe_member'")}
    assert flagged == {"a/b/x", "a/b/esc"}


def _change_after_read(monkeypatch, module: str, name: str, target: Path) -> None:
    """Wrap an indexing step so that target is appended to right after vault read it (a live writer)."""
    import importlib

    mod = importlib.import_module(module)
    original = getattr(mod, name)

    def wrapped(*args, **kwargs):
        result = original(*args, **kwargs)
        with open(target, "ab") as fh:
            fh.write(b"more\n")
        return result

    monkeypatch.setattr(mod, name, wrapped)


def test_a_file_changed_while_indexed_is_flagged_and_read_again(tmp_path, vault, monkeypatch, tally):
    tally("corruption")
    require("zstd")
    mirror = _plain_mirror(tmp_path / "m", 2)
    src = tmp_path / "src"
    src.mkdir()
    (src / "x.txt").write_text("x\n")
    gnu_tar(src, tmp_path / "a.tar", "gnu")
    archive = compress(tmp_path / "a.tar", mirror / "001_x/a.tar.zst", "zstd")
    db = str(tmp_path / "c.db")
    with monkeypatch.context() as m:
        _change_after_read(m, "cloudvault.index.files", "read_plain", mirror / "001_x/f0.txt")
        _change_after_read(m, "cloudvault.index.archives", "scan_to_shard", archive)
        r = vault("--catalog", db, "index", "--json", "--workers", "1", str(mirror))
    assert r.code == 5 and json.loads(r.out)["flags"]["changed_while_indexing"] == 2  # f0 and the archive
    again = json.loads(vault("--catalog", db, "index", "--json", str(mirror)).out)
    assert again["files_read"] == 2 and "changed_while_indexing" not in again["flags"]
    archive.write_bytes(archive.read_bytes()[: -len(b"more\n") * 1])  # as it was, appended bytes gone
    assert vault("--catalog", db, "index", "-q", str(mirror)).code == 0


def test_an_unreadable_file_is_read_again_even_when_its_stat_is_unchanged(tmp_path, vault, monkeypatch, tally):
    tally("corruption")
    import cloudvault.index.files as files

    mirror = _plain_mirror(tmp_path / "m", 2)
    db = str(tmp_path / "c.db")
    original = files.read_plain

    def flaky(ctx, st):
        if st.path.endswith("f1.txt"):
            raise PermissionError(13, "Permission denied")
        return original(ctx, st)

    with monkeypatch.context() as m:
        m.setattr(files, "read_plain", flaky)
        first = json.loads(vault("--catalog", db, "index", "--json", str(mirror)).out)
    assert first["flags"] == {"unreadable": 1}
    second = json.loads(vault("--catalog", db, "index", "--json", str(mirror)).out)
    assert second["files_read"] == 1 and second["flags"] == {} and not second["damaged"]
    third = json.loads(vault("--catalog", db, "index", "--json", str(mirror)).out)
    assert third["files_read"] == 0


def test_a_gzip_or_xz_named_tar_zst_is_read_for_what_it_is(tmp_path, vault, tally):
    """The bytes decide (archive/formats.py): a gzip or xz tar under a .tar.zst name is read as one; a gzip that
    holds no tar is flagged not_tar, named as the gzip it is."""
    tally("corruption")
    import gzip
    import io
    import lzma
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("a.txt")
        info.size = 3
        tf.addfile(info, io.BytesIO(b"hi\n"))
    (tmp_path / "m/018_x").mkdir(parents=True)
    (tmp_path / "m/018_x/g.tar.zst").write_bytes(gzip.compress(buf.getvalue()))
    (tmp_path / "m/018_x/x.tar.zst").write_bytes(lzma.compress(buf.getvalue()))
    (tmp_path / "m/018_x/n.tar.zst").write_bytes(gzip.compress(b"x" * 1000))
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(tmp_path / "m")).code == 5
    conn = sqlite3.connect(db)
    sql = "SELECT f.path, a.format, a.status, a.member_count FROM archives a JOIN files f ON f.id = a.file_id"
    found = {path: rest for path, *rest in conn.execute(sql)}
    assert found == {"018_x/g.tar.zst": ["tar.gz", "ok", 1], "018_x/x.tar.zst": ["tar.xz", "ok", 1],
                     "018_x/n.tar.zst": ["tar.gz", "not_tar", 0]}  # fmt: skip
    out = vault("--catalog", db, "extract", "018", "g.tar.zst/a.txt", "-o", "-")
    assert out.code == 0 and out.out == "hi\n"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_ssh_host_is_exit_6_naming_the_url(tmp_path, vault, tally):
    tally("bad_argument")
    if os.environ.get("CI") != "true":
        pytest.importorskip("paramiko")
    url = f"ssh://nobody@127.0.0.1:{_closed_port()}/mirror"
    r = vault("--catalog", str(tmp_path / "c.db"), "index", url)
    assert r.code == 6 and url in r.err and _one_line(r.err)


def test_s3_without_credentials_is_exit_6_naming_the_url(tmp_path, vault, monkeypatch, tally):
    tally("bad_argument")
    if os.environ.get("CI") != "true":
        pytest.importorskip("s3fs")
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance credentials to wait for
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    url = "s3://lab-backup-that-needs-credentials/Marvell_cloud"
    r = vault("--catalog", str(tmp_path / "c.db"), "index", url)
    assert r.code == 6 and url in r.err and _one_line(r.err)


def test_a_url_holding_a_password_is_refused_and_never_stored(tmp_path, vault, tally):
    tally("bad_argument")
    db = tmp_path / "c.db"
    r = vault("--catalog", str(db), "index", "ssh://lab:hunter2secret@127.0.0.1:22/mirror")
    leaked = "hunter2secret" in r.err + r.out or db.exists() and b"hunter2secret" in db.read_bytes()
    tally("secret_leak", int(leaked))
    assert r.code == 2 and "password" in r.err and not leaked


def test_empty_mirror_and_zero_workers_are_usage_errors(tmp_path, vault, tally):
    tally("bad_argument")
    db = str(tmp_path / "c.db")
    for argv in ([""], ["  "], *(["--workers", n, str(tmp_path)] for n in ("0", "-3", "1e3", "9" * 40))):
        r = vault("--catalog", db, "index", *argv)
        assert r.code == 2 and "Traceback" not in r.err, argv
    assert not Path(db).exists()
    for size in ("nan", "inf", "-1", "1e308"):
        r = vault("--catalog", db, "optimize", "--max-gb", size)
        assert r.code == 2 and "Traceback" not in r.err, size


def _mirrors(db: str) -> list[tuple[str, str, int]]:
    counted = "SELECT m.name, m.root, (SELECT count(*) FROM files f WHERE f.mirror_id = m.id) FROM mirrors m"
    return sqlite3.connect(db).execute(counted + " ORDER BY m.id").fetchall()


def test_a_mirror_indexed_then_deleted_is_dropped_by_prune_and_plain_index_works_again(tmp_path, vault, tally):
    """Class: a mirror gone for good (a temporary folder indexed by mistake) must not fail every later index."""
    import shutil

    from cloudvault.catalog.mirror_registry import registered

    tally("corruption")
    keep, gone = _plain_mirror(tmp_path / "keep"), _plain_mirror(tmp_path / "scratch", 2)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(keep), str(gone)).code == 0
    shutil.rmtree(gone)
    r = vault("--catalog", db, "index", "-q")
    tally("rows_lost", 6 - sum(n for *_, n in _mirrors(db)))
    assert r.code == 6 and _one_line(r.err) and "vault index --prune" in r.err and "vault mirrors rm" in r.err, r.err
    r = vault("--catalog", db, "index", "--json", "--prune")
    assert r.code == 0, r.err
    assert json.loads(r.out)["dropped"] == ["scratch"] and json.loads(r.out)["files_deleted"] == 2
    assert _mirrors(db) == [("keep", str(keep), 4)]
    assert [row.root for row in registered()] == [str(keep)]
    for _ in range(2):  # and every later plain index works
        assert vault("--catalog", db, "index", "-q").code == 0 and _mirrors(db) == [("keep", str(keep), 4)]


def test_a_vanished_root_named_on_the_command_line_is_dropped_by_prune(tmp_path, vault, tally):
    tally("corruption")
    gone = _plain_mirror(tmp_path / "scratch", 2)
    db = str(tmp_path / "c.db")
    assert vault("--catalog", db, "index", "-q", str(gone)).code == 0
    (gone / "001_x/f0.txt").unlink()
    (gone / "001_x/f1.txt").unlink()
    (gone / "001_x").rmdir()
    gone.rmdir()
    assert vault("--catalog", db, "index", "-q", "--prune", str(gone)).code == 0 and _mirrors(db) == []


def test_indexing_an_empty_folder_warns_in_one_line(tmp_path, vault, tally):
    tally("bad_argument")
    empty = tmp_path / "empty"
    empty.mkdir()
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", str(empty))
    warnings = [line for line in r.err.splitlines() if "warning" in line]
    assert r.code == 0 and len(warnings) == 1 and "holds no files" in warnings[0], r.err
    assert "vault mirrors rm empty" in warnings[0]
    r = vault("--catalog", db, "index", "--json", str(empty))
    assert json.loads(r.out)["empty"] == ["empty"]


@pytest.mark.parametrize("definition", [[], ["--mirror", "marvell_cloud"]])
def test_two_roots_of_one_name_in_one_command_are_two_mirrors_named_before_either_is_walked(tmp_path, vault, tally,
                                                                                            definition):  # fmt: skip
    """Class: display names given one root at a time inside one run (the second took the first's name, and its
    files were then taken for the first mirror emptied)."""
    tally("bad_argument")
    a = _plain_mirror(tmp_path / "a/Marvell_cloud")
    b = _plain_mirror(tmp_path / "b/Marvell_cloud", 2)
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", "-q", *definition, str(a), str(b))
    assert r.code == 0, r.err
    base = "marvell_cloud" if definition else "Marvell_cloud"
    expected = [(base, str(a), 4), (f"{base}-2", str(b), 2)]
    assert _mirrors(db) == expected
    assert vault("--catalog", db, "index", "-q").code == 0 and _mirrors(db) == expected
    assert vault("--catalog", db, "index", "-q", str(b), str(a)).code == 0 and _mirrors(db) == expected


def test_a_shard_that_fills_while_its_rows_are_written_is_one_line_and_nothing_half_recorded(
    tmp_path, vault, monkeypatch, tally
):
    """The member rows are written by a thread beside the scan (catalog/shards.py MemberRows): SQLite's 'database
    or disk is full' there is the one-line full-disk error and its exit code, the catalog holds none of the
    archive, and the next run records it whole."""
    tally("corruption")
    import tarfile

    from cloudvault.catalog import shards

    src = tmp_path / "src"
    src.mkdir()
    for i in range(3000):
        (src / f"r{i}.log").write_bytes(b"x" * (i % 300))
    mirror = _plain_mirror(tmp_path / "m", 1)
    with tarfile.open(tmp_path / "a.tar", "w") as tar:
        tar.add(src, "src")
    compress(tmp_path / "a.tar", mirror / "001_x/a.tar.zst", "zstd")
    db = tmp_path / "c.db"
    opened = shards.open_shard

    def small_shard(path):
        shard = opened(path)
        shard.execute("PRAGMA max_page_count = 30")
        return shard

    with monkeypatch.context() as m:
        m.setattr(shards, "open_shard", small_shard)
        r = vault("--catalog", str(db), "index", "-q", "--workers", "1", str(mirror))
    assert r.code == 6 and _one_line(r.err) and "no space left" in r.err, r.err
    assert sqlite3.connect(db).execute("SELECT count(*) FROM members").fetchone() == (0,)
    assert vault("--catalog", str(db), "index", "-q", str(mirror)).code == 0
    assert sqlite3.connect(db).execute("SELECT count(*) FROM members").fetchone() == (3001,)
