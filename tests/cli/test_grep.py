"""`vault grep` as users run it: words inside logs, CSV and JSON files and archive members of the demo, with the
entry they belong to, checked against GNU grep over what `zstd -dc | tar -xO` gives; secrets never printed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

E018 = "018_aicluster_breakdown_debugger"
ACCEPT = "data/accept_g07.tar.zst"


def member_text(mirror: Path, archive: str, member: str) -> bytes:
    """A member's bytes as GNU tar gives them: the truth vault's lines are checked against."""
    cmd = f"zstd -dc '{mirror / archive}' | tar -xO './{member}'"
    return subprocess.run(cmd, shell=True, capture_output=True, check=True).stdout


def gnu_grep(data: bytes, *args: str) -> list[str]:
    out = subprocess.run(["grep", "-a", *args], input=data, capture_output=True)
    return out.stdout.decode().splitlines()


def test_a_word_inside_a_log_member_is_found_with_its_entry_archive_and_line(demo_catalog, demo_mirror, vault):
    r = vault("--catalog", str(demo_catalog), "grep", "accept_len=4", "018")
    assert r.code == 0, r.err
    prefix = f"{E018}:{ACCEPT}::logs/accept_00.log:"
    ours = [line.removeprefix(prefix) for line in r.out.splitlines() if line.startswith(prefix)]
    truth = gnu_grep(member_text(demo_mirror, f"{E018}/{ACCEPT}", "logs/accept_00.log"), "-n", "accept_len=4")
    assert ours == truth and truth


def test_csv_files_and_json_members_are_found(demo_catalog, demo_mirror, vault):
    db = str(demo_catalog)
    r = vault("--catalog", db, "grep", "-F", "140-160K", "016")
    entry = "016_ysshin_rtxpro6000_results"
    truth = subprocess.run(["grep", "-rn", "-F", "140-160K", "--exclude=*.zst", "."], cwd=demo_mirror / entry,
                           capture_output=True, text=True).stdout.splitlines()  # fmt: skip
    assert sorted(r.out.splitlines()) == sorted(f"{entry}:{line.removeprefix('./')}" for line in truth)
    assert any(".csv:" in line for line in r.out.splitlines())
    r = vault("--catalog", db, "grep", '"node": "n81"', "018")
    assert f'{E018}:{ACCEPT}::dumps/accept_meta.json:1:{{"kind": "accept", "node": "n81"}}' in r.out.splitlines()


def test_the_demo_secret_is_searched_but_never_printed(demo_catalog, demo_mirror, vault):
    archive = demo_mirror / "019_aicluster_dump_debugger/data/saturate_logs_n61.tar.zst"
    raw = member_text(demo_mirror, str(archive.relative_to(demo_mirror)), "logs/saturate_env.log").decode()
    token = next(line for line in raw.splitlines() if "HF_TOKEN" in line).split("=", 1)[1].strip()
    assert len(token) > 8
    db = str(demo_catalog)
    for args in (["HF_TOKEN"], ["-i", "hf_"], ["--json", "TOKEN"], ["-C", "3", "export"], ["-v", "zzz", "019"],
                 ["--color", "always", token[:6]], ["-F", token]):  # fmt: skip
        r = vault("--catalog", db, "grep", *args)
        assert token not in r.out and token not in r.err, args
        assert token[3:12] not in r.out
    r = vault("--catalog", db, "grep", "HF_TOKEN", "019")
    assert "logs/saturate_env.log:2:export [redacted hf_token_assignment]" in r.out
    docs = json.loads(vault("--catalog", db, "grep", "--json", "HF_TOKEN", "019").out)["matches"]
    assert {"entry", "path", "archive", "member", "line", "offset", "text"} <= docs[0].keys()
    assert any(d["text"] == "export [redacted hf_token_assignment]" for d in docs)


def test_exit_codes_are_greps(demo_catalog, vault):
    db = str(demo_catalog)
    assert vault("--catalog", db, "grep", "accept_len", "018").code == 0
    assert vault("--catalog", db, "grep", "no-such-word-anywhere-xyzzy").code == 1
    assert vault("--catalog", db, "grep", "(unclosed").code == 2
    q = vault("--catalog", db, "grep", "-q", "accept_len")
    assert q.code == 0 and q.out == ""
    empty = vault("--catalog", db, "grep", "--json", "no-such-word-xyzzy")
    assert empty.code == 1 and json.loads(empty.out) == {"matches": []}
    counts = json.loads(vault("--catalog", db, "grep", "--json", "-c", "accept_len", "018").out)["matches"]
    assert counts and all(c["type"] == "count" and c["count"] > 0 for c in counts)
    assert vault("--catalog", db, "grep", "-q", "no-such-word-xyzzy").code == 1
    assert vault("--catalog", db, "grep", "x", "no-such-entry").code == 3


@pytest.mark.parametrize(
    "args",
    [["-i", "ACCEPT_LEN=3"], ["-w", "step"], ["-v", "accept_len=[1-5]"], ["-m", "3", "accept"],
     ["-C", "2", "accept_len=7"], ["-A", "1", "-B", "2", "t=1"], ["-c", "accept_len=2"],
     ["-E", "step [0-9]+ accept_len=(1|5)"]],
)  # fmt: skip
def test_options_agree_with_gnu_grep_on_a_member(demo_catalog, demo_mirror, vault, args):
    args = [a for a in args if a != "-E"]
    r = vault("--catalog", str(demo_catalog), "grep", *args, "018:logs/accept_01.log")
    label = f"{E018}:{ACCEPT}::logs/accept_01.log"
    data = member_text(demo_mirror, f"{E018}/{ACCEPT}", "logs/accept_01.log")
    truth = gnu_grep(data, "-E", *([] if "-c" in args else ["-n"]), *args)
    ours = [line if line == "--" else line.removeprefix(label)[1:] for line in r.out.splitlines()]
    assert ours == truth


def test_files_with_matches_glob_and_kind(demo_catalog, vault):
    db = str(demo_catalog)
    names = vault("--catalog", db, "grep", "-l", "accept_len", "018").out.splitlines()
    assert f"{E018}:{ACCEPT}::logs/accept_00.log" in names and len(names) == len(set(names))
    assert all(":" not in n.split("::")[-1] for n in names)
    logs = vault("--catalog", db, "grep", "-l", "--glob", "*.json", "accept", "018").out.splitlines()
    assert logs and all(n.endswith(".json") for n in logs)
    none = vault("--catalog", db, "grep", "-l", "--glob", "!*.log", "accept_len", "018")
    assert all(not n.endswith(".log") for n in none.out.splitlines())
    files = vault("--catalog", db, "grep", "-l", "--kind", "file", "accept", "018").out.splitlines()
    members = vault("--catalog", db, "grep", "-l", "--kind", "member", "accept", "018").out.splitlines()
    assert files and members and all("::" not in f for f in files) and all("::" in m for m in members)


def test_a_scoped_grep_opens_only_that_entrys_archives(demo_catalog, vault, monkeypatch, tmp_path):
    from cloudvault.io import members

    opened = tmp_path / "opened"
    real = members.archive_source

    def counted(conn, file_id, use_copy=True):
        path = conn.execute("SELECT path FROM files WHERE id = ?", (file_id,)).fetchone()[0]
        with open(opened, "a") as fh:  # a file: the forked workers count too
            fh.write(path + "\n")
        return real(conn, file_id, use_copy)

    monkeypatch.setattr(members, "archive_source", counted)
    r = vault("--catalog", str(demo_catalog), "grep", "-j", "2", "accept_len", "018")
    assert r.code == 0
    paths = opened.read_text().splitlines()
    conn = sqlite3.connect(demo_catalog)
    archives = {p for (p,) in conn.execute("SELECT f.path FROM files f JOIN archives a ON a.file_id = f.id "
                                           "WHERE f.entry_id = ?", (E018,))}  # fmt: skip
    assert set(paths) == archives and len(paths) == len(archives)


def test_a_member_that_does_not_verify_is_reported_and_not_searched(demo_catalog, vault):
    conn = sqlite3.connect(demo_catalog)
    conn.execute("UPDATE members SET blake3 = ? WHERE path = './logs/accept_00.log' OR path = 'logs/accept_00.log'",
                 ("0" * 64,))  # fmt: skip
    conn.commit()
    conn.close()
    r = vault("--catalog", str(demo_catalog), "grep", "accept_len", "018")
    assert r.code == 2
    assert f"{E018}:{ACCEPT}::logs/accept_00.log: its bytes do not match the catalog" in r.err
    assert "logs/accept_00.log:" not in r.out and "logs/accept_01.log:" in r.out


def test_ctrl_c_is_one_line_and_exit_130(demo_catalog, vault, monkeypatch):
    from cloudvault.grep import lines

    def interrupted(self, chunk):
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(lines.LineSearch, "feed", interrupted)
    r = vault("--catalog", str(demo_catalog), "grep", "-j", "1", "accept_len", "018")
    assert r.code == 130
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


# -- a held-out mirror made with GNU tar and pzstd, not by vault ------------------------------------------------
NEEDLE = "needle-7f3"


@pytest.fixture
def heldout(tmp_path, vault):
    """An entry with a plain log and a pzstd archive (GNU tar): a 3 MiB log with a needle line across its first
    MiB, 300 small members, a JSON, a binary dump holding the needle."""
    from conftest import require

    require("tar")
    require("pzstd")
    src = tmp_path / "src"
    (src / "logs").mkdir(parents=True)
    (src / "many").mkdir()
    filler = b"".join(b"step %06d loss=0.%04d ok\n" % (i, i % 9973) for i in range(120_000))  # ~3 MiB
    cut = filler.rfind(b"\n", 0, (1 << 20) - 10) + 1
    big = filler[:cut] + b"x" * 30 + NEEDLE.encode() + b" spans the first MiB\n" + filler[cut:]
    (src / "logs/big.log").write_bytes(big)
    for i in range(300):
        (src / f"many/f{i:03d}.txt").write_bytes(b"line one\n" + (f"{NEEDLE} {i}\n".encode() if i % 7 == 0 else b""))
    (src / "metrics.json").write_text(json.dumps({"tag": NEEDLE, "loss": 0.5}) + "\n")
    (src / "weights.bin").write_bytes(b"\0\1\2" + NEEDLE.encode() + b"\n")
    entry = tmp_path / "m" / "100_heldout"
    (entry / "data").mkdir(parents=True)
    (entry / "notes.log").write_text(f"a {NEEDLE} in a plain file\nnothing here\n")
    archive = entry / "data/run.tar.zst"
    subprocess.run(f"tar -C '{src}' -cf - . | pzstd -q -p 2 -o '{archive}'", shell=True, check=True)
    db = tmp_path / "catalog.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    return db, archive


def truth_counts(archive: Path, needle: str) -> dict[str, int]:
    """Per member, `zstd -dc | tar -xO | grep -c` (text members; ripgrep and vault skip binary ones)."""
    names = subprocess.run(f"zstd -dc '{archive}' | tar -t", shell=True, capture_output=True, text=True).stdout
    counts = {}
    for name in names.split():
        if name.endswith("/"):
            continue
        data = subprocess.run(f"zstd -dc '{archive}' | tar -xO '{name}'", shell=True, capture_output=True).stdout
        if b"\0" in data[:8192]:
            continue
        n = len(gnu_grep(data, "-F", needle))
        if n:
            counts[name.removeprefix("./")] = n
    return counts


def test_a_heldout_pzstd_mirror_agrees_with_tar_and_grep(heldout, vault):
    db, archive = heldout
    r = vault("--catalog", str(db), "grep", "-c", "-F", NEEDLE)
    assert r.code == 0, r.err
    ours = dict(line.rsplit(":", 1) for line in r.out.splitlines())
    label = "100_heldout:data/run.tar.zst::"
    want = {label + name: str(n) for name, n in truth_counts(archive, NEEDLE).items()}
    want["100_heldout:notes.log"] = "1"
    assert ours == want
    lines = vault("--catalog", str(db), "grep", "-F", NEEDLE, "100:logs/*").out.splitlines()
    assert lines == [f"{label}logs/big.log:{big_line(archive)}:{'x' * 30}{NEEDLE} spans the first MiB"]
    binary = vault("--catalog", str(db), "grep", "--binary", "-l", "-F", NEEDLE, "100:*.bin").out.splitlines()
    assert binary == [f"{label}weights.bin"]


def big_line(archive: Path) -> str:
    data = subprocess.run(f"zstd -dc '{archive}' | tar -xO ./logs/big.log", shell=True, capture_output=True).stdout
    return gnu_grep(data, "-n", "-F", NEEDLE)[0].split(":", 1)[0]


def test_a_big_member_that_does_not_verify_shows_none_of_its_lines(heldout, vault):
    db, _ = heldout
    conn = sqlite3.connect(db)
    # the recorded hashes disagree with the bytes: the whole hash, and each piece's where it has pieces (over 1 MiB)
    # (a BLOB's kind byte, where it has one, kept: the digests after it zeroed)
    (pieces,) = conn.execute("SELECT pieces FROM members WHERE path LIKE '%logs/big.log'").fetchone()
    kind = len(pieces) % 16
    conn.execute("UPDATE members SET blake3 = ?, pieces = ? WHERE path LIKE '%logs/big.log'",
                 ("1" * 64, pieces[:kind] + bytes(len(pieces) - kind)))  # fmt: skip
    conn.commit()
    conn.close()
    r = vault("--catalog", str(db), "grep", "-F", NEEDLE, "100")
    assert r.code == 2
    assert "100_heldout:data/run.tar.zst::logs/big.log: " in r.err and "piece hash" in r.err
    assert "big.log:" not in r.out and "many/f007.txt:2:" in r.out


def test_a_multiframe_archive_searched_in_pieces_finds_what_tar_and_grep_find(tmp_path, vault, monkeypatch):
    """An archive of 1 MiB zstd frames (GNU tar, split, zstd), searched as pieces of 2 MiB by two workers: every
    member counted once, as `zstd -dc | tar -xO | grep -c` counts it."""
    from cloudvault.grep import targets

    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):
        lines = b"".join(b"%s row %d of file %d\n" % (b"needle" if (i * 7 + j) % 13 == 0 else b"hay", j, i)
                         for j in range(12_000))  # fmt: skip
        (src / f"part{i:02d}.log").write_bytes(lines)
    entry = tmp_path / "m" / "101_frames"
    entry.mkdir(parents=True)
    archive = entry / "parts.tar.zst"
    subprocess.run(f"tar -C '{src}' -cf - . | split -b 1M --filter='zstd -q -c' - > '{archive}'", shell=True,
                   check=True)  # fmt: skip
    db = tmp_path / "catalog.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    assert sqlite3.connect(db).execute("SELECT frame_count FROM archives").fetchone()[0] > 8
    monkeypatch.setattr(targets, "PIECE", 2 << 20)
    tasks = targets.plan(sqlite3.connect(db), None, None, ())
    assert len(tasks) > 3 and len({t.file_id for t in tasks}) == 1
    r = vault("--catalog", str(db), "grep", "-j", "2", "-c", "needle")
    ours = dict(line.rsplit(":", 1) for line in r.out.splitlines())
    want = {f"101_frames:parts.tar.zst::{name}": str(n) for name, n in truth_counts(archive, "needle").items()}
    assert ours == want


def test_a_huge_member_and_a_huge_line_are_streamed_not_held(tmp_path, vault):
    """A 160 MiB log and a 40 MiB line with no newline: found, with the peak memory of the whole vault process
    under 200 MB (neither is ever read whole)."""
    import sys

    src = tmp_path / "src"
    src.mkdir()
    with open(src / "huge.log", "wb") as fh:
        block = b"".join(b"epoch %d step %d loss=0.25 ok\n" % (i // 1000, i) for i in range(40_000))
        for n in range(160 << 20 >> 20):
            fh.write(block[: 1 << 20])
            if n == 100:
                fh.write(b"the needle-9q line\n")
    (src / "oneline.txt").write_bytes(b"a" * (40 << 20) + b" needle-9q at the end")
    entry = tmp_path / "m" / "102_huge"
    entry.mkdir(parents=True)
    subprocess.run(f"tar -C '{src}' -cf - . | zstd -q -1 -T0 -o '{entry}/big.tar.zst'", shell=True, check=True)
    db = tmp_path / "catalog.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    r = subprocess.run(["/usr/bin/time", "-f", "peak %M", sys.executable, "-m", "cloudvault", "--catalog", str(db),
                        "grep", "-j", "1", "-c", "needle-9q"], capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["102_huge:big.tar.zst::huge.log:1", "102_huge:big.tar.zst::oneline.txt:1"]
    peak_kib = int(r.stderr.split("peak ")[-1])
    assert peak_kib < 200 << 10, f"peak RSS {peak_kib >> 10} MiB"


class Recorded:
    """A progress facility that remembers what it was told."""

    def __init__(self) -> None:
        self.total, self.done, self.currents, self.finished = 0, 0, [], False

    def start(self, total_bytes: int, total_files: int) -> None:
        self.total = total_bytes

    def advance(self, nbytes: int) -> None:
        self.done += nbytes

    def current(self, path: str) -> None:
        self.currents.append(path)

    def finish(self) -> None:
        self.finished = True


def test_progress_counts_bytes_and_members_and_names_the_archive(demo_catalog, vault):
    from cloudvault.catalog.db import open_catalog
    from cloudvault.grep.run import GrepOptions, grep

    progress = Recorded()
    conn = open_catalog(demo_catalog, readonly=True)
    found = list(grep(conn, str(demo_catalog), GrepOptions("accept_len", jobs=2), ["018"], progress=progress))
    raw = conn.execute("SELECT sum(a.raw_size) FROM archives a JOIN files f ON f.id = a.file_id "
                       "WHERE f.entry_id = ?", (E018,)).fetchone()[0]  # fmt: skip
    plain = conn.execute("SELECT sum(size) FROM files WHERE entry_id = ? AND kind = 'file' AND id NOT IN "
                         "(SELECT file_id FROM archives)", (E018,)).fetchone()[0]  # fmt: skip
    assert found and progress.finished
    assert progress.total == progress.done == raw + plain
    assert any("members, data/accept_g07.tar.zst" in c for c in progress.currents)
    r = vault("--catalog", str(demo_catalog), "grep", "accept_len", "018")
    assert r.err == ""  # not a terminal: no progress on stderr


def test_a_member_flagged_by_a_rule_grep_does_not_know_has_its_lines_withheld(demo_catalog, vault):
    """A mirror definition's own secret rule flagged a member: grep cannot redact what it cannot match, so every
    line it shows of that member is withheld whole."""
    conn = sqlite3.connect(demo_catalog)
    sql = "SELECT id, mirror_id FROM files WHERE path LIKE '%accept_g07.tar.zst'"
    file_id, mirror_id = conn.execute(sql).fetchone()
    conn.execute("INSERT INTO flags (mirror_id, entry_id, file_id, member, kind, detail) VALUES (?, ?, ?, ?, "
                 "'secret', 'lab_api_key at line 3 (value not stored)')",
                 (mirror_id, E018, file_id, "logs/accept_00.log"))  # fmt: skip
    conn.commit()
    conn.close()
    r = vault("--catalog", str(demo_catalog), "grep", "accept_len=4", "018:logs/accept_0[01].log")
    lines = r.out.splitlines()
    flagged = [line for line in lines if "logs/accept_00.log:" in line]
    assert flagged and all(line.endswith(":[redacted line: flagged lab_api_key]") for line in flagged)
    assert any("logs/accept_01.log:" in line and "accept_len=4" in line for line in lines)


@pytest.mark.parametrize("damage", [b"\x40", b"\0" * 4096], ids=["a flipped bit", "4 KiB zeroed"])
def test_damaged_bytes_inside_the_archive_are_reported_and_the_rest_is_searched(heldout, vault, damage):
    """Bytes damaged inside the compressed frames of big.log (size and mtime kept, so the archive still looks as
    indexed): big.log is named on stderr (its bytes do not verify, or its frame does not decode), exit 2, and the
    search goes on (a bit flipped: the members after it are found; a frame that does not decode and that small
    members share ends that archive's search, named on stderr too)."""
    db, archive = heldout
    data = bytearray(archive.read_bytes())
    stat = archive.stat()
    at = len(data) // 4  # inside big.log's frames (the first quarter of the tar)
    if len(damage) == 1:
        data[at] ^= damage[0]
    else:
        data[at : at + len(damage)] = damage
    archive.write_bytes(bytes(data))
    os.utime(archive, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    r = vault("--catalog", str(db), "grep", "-c", "-F", NEEDLE, "100")
    assert r.code == 2
    assert "100_heldout:data/run.tar.zst::logs/big.log: " in r.err and "Traceback" not in r.err
    assert "100_heldout:notes.log:1" in r.out.splitlines()
    if len(damage) == 1:
        assert "100_heldout:data/run.tar.zst::many/f294.txt:1" in r.out.splitlines(), r.err


def test_a_plain_file_changed_in_place_is_reported_and_the_entrys_other_files_still_searched(tmp_path, vault):
    """Class: one plain file vault refuses (changed in place since it was recorded) is that file's failure, named
    by its path; it never ends the search of the other plain files read in the same batch."""
    entry = tmp_path / "m" / "200_plain"
    entry.mkdir(parents=True)
    for name in ("a.log", "b.log", "c.log"):
        (entry / name).write_text(f"{NEEDLE} in {name}\n")
    db = tmp_path / "catalog.db"
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 0
    changed = entry / "a.log"
    stat = changed.stat()
    changed.write_text(f"{NEEDLE} in a.lag\n")  # same size, same mtime: changed in place
    os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert vault("--catalog", str(db), "index", "-q", str(tmp_path / "m")).code == 5
    r = vault("--catalog", str(db), "grep", "-F", NEEDLE, "200")
    assert r.code == 2
    assert "200_plain:a.log: " in r.err and "changed in place" in r.err
    assert "200_plain:b.log:1:" in r.out and "200_plain:c.log:1:" in r.out and "a.lag" not in r.out


def test_max_filesize_skips_what_is_bigger_and_a_bad_size_is_one_usage_line(heldout, vault):
    db, _ = heldout
    r = vault("--catalog", str(db), "grep", "-l", "--max-filesize", "1M", "-F", NEEDLE, "100")
    assert r.code == 0
    assert "logs/big.log" not in r.out and "many/f007.txt" in r.out and "notes.log" in r.out  # 3 MiB skipped
    everything = vault("--catalog", str(db), "grep", "-l", "-F", NEEDLE, "100").out
    assert "logs/big.log" in everything
    bad = vault("--catalog", str(db), "grep", "--max-filesize", "lots", "-F", NEEDLE, "100")
    assert bad.code == 2 and "--max-filesize 'lots'" in bad.err and len(bad.err.strip().splitlines()) == 1


FORK_WHILE_A_THREAD_OPENS_SQLITE = """
import sqlite3, sys, threading
from cloudvault.catalog.db import open_catalog
from cloudvault.grep.run import GrepOptions, grep

catalog, scratch = sys.argv[1], sys.argv[2]
stop = threading.Event()

def opens():  # a thread of the host process that opens and closes SQLite files all the while
    while not stop.is_set():
        sqlite3.connect(scratch).close()

conn = open_catalog(catalog, readonly=True)
expected = sorted(map(repr, grep(conn, catalog, GrepOptions("accept_len", jobs=1), ["018"])))
threading.Thread(target=opens, daemon=True).start()
assert expected and threading.active_count() == 2  # found lines; and the workers do not fork from here
for turn in range(40):
    assert sorted(map(repr, grep(conn, catalog, GrepOptions("accept_len", jobs=2), ["018"]))) == expected
stop.set()
print("done")
"""


def test_grep_s_workers_start_safely_in_a_process_whose_other_thread_is_inside_sqlite(demo_catalog, tmp_path):
    """A worker forked while another thread of the process holds one of SQLite's own locks (opening a file) would
    wait on it for ever, and grep with it: a process with other threads starts its workers from a fresh one."""
    done = subprocess.run([sys.executable, "-c", FORK_WHILE_A_THREAD_OPENS_SQLITE, str(demo_catalog),
                           str(tmp_path / "scratch.db")], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-2000:]
