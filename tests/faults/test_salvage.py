"""An archive intact when indexed and damaged since (a flipped bit in a frame, a cut-off file): a routine re-index
keeps its recorded members; the members of intact frames stay extractable, those the damage took are refused
naming the frame and its offset, and `vault extract --salvage` writes everything that still verifies. Counted
against tarfile on the undamaged copy."""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
import subprocess
import tarfile
from pathlib import Path

import blake3
import pytest
import zstandard
from archives import flip_byte, three_frame_mirror
from conftest import require

ARCHIVE = "exp02/data.tar.zst"


def frame_table(path: Path) -> list[tuple[int, int, int, int]]:
    """(comp offset, comp size, raw offset, raw size) of each zstd frame, found by python-zstandard alone."""
    data, frames, at, raw_at = path.read_bytes(), [], 0, 0
    while at < len(data):
        if 0x184D2A50 <= int.from_bytes(data[at : at + 4], "little") <= 0x184D2A5F:  # pzstd's skippable frame
            at += 8 + int.from_bytes(data[at + 4 : at + 8], "little")
            continue
        dobj = zstandard.ZstdDecompressor().decompressobj()
        raw = dobj.decompress(data[at:])
        size = len(data) - at - len(dobj.unused_data)
        frames.append((at, size, raw_at, len(raw)))
        at, raw_at = at + size, raw_at + len(raw)
    return frames


def tar_members(path: Path) -> dict[str, tuple[int, bytes]]:
    """name -> (data offset in the tar, bytes) of every regular member, as tarfile reads the undamaged copy."""
    with open(path, "rb") as fh:
        tar_bytes = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True).read()
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        return {m.name.removeprefix("./"): (m.offset_data, tar.extractfile(m).read()) for m in tar if m.isfile()}


def _indexed(tmp_path, vault, how: str = "pzstd"):
    require("pzstd")
    root = three_frame_mirror(tmp_path / "m", tmp_path / "work", how)
    db = tmp_path / "cat.db"
    assert vault("--catalog", str(db), "index", "--quiet", str(root)).code == 0
    good = tmp_path / "good.tar.zst"
    shutil.copy2(root / ARCHIVE, good)
    return root, db, good


def damage(archive: Path, how: str, frames: list) -> set[int]:
    """Damage the archive (its mtime kept); the indexes of the frames the damage reaches."""
    middle = len(frames) // 2
    cut = {"cut_at_boundary": frames[-1][0], "cut_mid_frame": frames[middle][0] + frames[middle][1] // 2}
    if how in cut:
        stamp = os.stat(archive).st_mtime_ns
        os.truncate(archive, cut[how])
        os.utime(archive, ns=(stamp, stamp))
        return {i for i, f in enumerate(frames) if f[0] + f[1] > cut[how]}
    i = {"flip_first": 0, "flip_middle": middle, "flip_last": len(frames) - 1}[how]
    flip_byte(archive, frames[i][0] + frames[i][1] // 2)
    return {i}


def in_frames(offset: int, size: int, frames: list, which: set[int]) -> bool:
    return any(offset < frames[i][2] + frames[i][3] and offset + size > frames[i][2] for i in which)


CASES = [("pzstd", how) for how in ("flip_first", "flip_middle", "flip_last", "cut_at_boundary", "cut_mid_frame")]
CASES += [("zstd", "flip_middle"), ("python", "flip_middle"), ("python", "cut_mid_frame")]


@pytest.mark.parametrize("shape,how", CASES)
def test_a_damaged_archive_keeps_its_members_and_salvage_writes_every_intact_one(tmp_path, vault, shape, how, tally):
    """pzstd: three frames; zstd: one frame (the members before the damage still verify); python: a frame a MiB."""
    tally("corruption")
    root, db, good = _indexed(tmp_path, vault, shape)
    frames = frame_table(good)
    assert len(frames) == {"pzstd": 3, "zstd": 1, "python": 18}[shape]
    members = tar_members(good)
    assert len(members) == 28
    hit = damage(root / ARCHIVE, how, frames)
    intact = {name for name, (offset, data) in members.items() if not in_frames(offset, len(data), frames, hit)}
    assert len(intact) < 28 and (intact or shape == "zstd")

    r = vault("--catalog", str(db), "index", str(root))  # a routine re-index
    assert r.code == 5, r.out + r.err
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM members WHERE type = 'file'").fetchone()[0] == 28  # none forgotten
    details = [d for (d,) in conn.execute("SELECT detail FROM flags WHERE kind = 'damaged_frame'")]
    first = min(hit)
    assert any(f"frame {first} at compressed offset {frames[first][0]}" in d for d in details), details
    r = vault("--catalog", str(db), "verify", "exp02")
    assert r.code == 5 and "all match" not in r.out

    out = tmp_path / "salvaged"
    r = vault("--catalog", str(db), "extract", "--salvage", "exp02", "-o", str(out))
    assert r.code == 5, r.out + r.err
    written = {p.name: p.read_bytes() for p in out.iterdir()}
    assert written.pop("notes.txt") == (root / "exp02/notes.txt").read_bytes()  # the entry's plain file too
    assert intact <= set(written)  # every member of an intact frame, and any in a damaged frame that still verifies
    assert written  # one frame: the members before the damage
    assert all(written[name] == members[name][1] for name in written)  # each as tarfile reads the undamaged copy
    refused = set(members) - set(written)
    assert refused and all(in_frames(*_span(members[n]), frames, hit) for n in refused)
    assert all(name in r.err for name in refused) and f"frame {min(hit)}" in r.err
    assert f"{len(refused)} not written" in r.err

    # one member that still verifies alone, without --salvage: extracted and verified
    name = sorted(intact or written)[-1]
    r = vault("--catalog", str(db), "extract", "exp02", name, "-o", str(tmp_path / "one"))
    assert r.code == 0 and (tmp_path / "one" / name).read_bytes() == members[name][1]
    # one the damage took: refused, naming its frame and offset, nothing written
    lost = sorted(refused)[0]
    r = vault("--catalog", str(db), "extract", "exp02", lost, "-o", str(tmp_path / "lost"))
    assert r.code == 5 and "frame" in r.err and "compressed offset" in r.err, r.err
    assert not (tmp_path / "lost" / lost).exists()


def _span(member: tuple[int, bytes]) -> tuple[int, int]:
    return member[0], len(member[1])


def test_a_whole_seekable_copy_still_gives_the_members_the_damage_took_from_the_original(tmp_path, vault, tally):
    """One frame, damaged in the middle, after `vault optimize` made a seekable copy: extract reads every member
    from the copy, verified; verify (which reads the mirror's own archive) still names the damage."""
    tally("corruption")
    root, db, good = _indexed(tmp_path, vault, "zstd")
    assert vault("--catalog", str(db), "optimize").code == 0
    members = tar_members(good)
    frames = frame_table(good)
    damage(root / ARCHIVE, "flip_middle", frames)
    assert vault("--catalog", str(db), "index", "--quiet", str(root)).code == 5
    out = tmp_path / "all"
    r = vault("--catalog", str(db), "extract", "--salvage", "exp02", "*.bin", "-o", str(out))
    assert r.code == 0, r.err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {name: data for name, (_, data) in members.items()}
    r = vault("--catalog", str(db), "verify", "exp02")
    assert r.code == 5 and "damaged member" in r.out


FIRST_INDEX = [("pzstd", "flip_middle"), ("pzstd", "flip_first"), ("python", "flip_middle"), ("cat", "flip_middle")]


def concatenated(root: Path, work: Path) -> None:
    """The archive again as three `zstd -c` streams of 8 MiB of the tar one after another: frames that record no
    size, without pzstd's skippable frames (read by one decoder: the first frame does not look like many)."""
    tar = (work / "exp02.tar").read_bytes()
    parts = [tar[: 8 << 20], tar[8 << 20 : 16 << 20], tar[16 << 20 :]]
    out = b"".join(subprocess.run(["zstd", "-q", "-c"], input=p, capture_output=True, check=True).stdout for p in parts)
    archive = root / ARCHIVE
    stamp = os.stat(archive).st_mtime_ns
    archive.write_bytes(out)
    os.utime(archive, ns=(stamp, stamp))


@pytest.mark.parametrize("shape,how", FIRST_INDEX)
def test_an_archive_damaged_at_its_first_index_keeps_the_members_of_the_frames_after_the_damage(
    tmp_path, vault, shape, how, tally
):
    """No frame table from a prior generation: the frames after the damaged one are found again by the next frame
    magic, so their members are indexed (each with the BLAKE3 of what tarfile reads from the undamaged copy) and
    extract verified; the flag names the damaged frame's real compressed offset; members the damage reaches are
    not handed out."""
    tally("corruption")
    require("pzstd")
    root = three_frame_mirror(tmp_path / "m", tmp_path / "work", "zstd" if shape == "cat" else shape)
    if shape == "cat":
        concatenated(root, tmp_path / "work")
    good = tmp_path / "good.tar.zst"
    shutil.copy2(root / ARCHIVE, good)
    frames, members = frame_table(good), tar_members(good)
    assert len(frames) >= 3
    hit = damage(root / ARCHIVE, how, frames)
    after = {name for name, (offset, data) in members.items() if offset > frames[max(hit)][2] + frames[max(hit)][3]}
    assert after  # members in the frames after the damage: what salvage must not lose

    db = tmp_path / "cat.db"
    r = vault("--catalog", str(db), "index", "--quiet", str(root))
    assert r.code == 5, r.out + r.err
    conn = sqlite3.connect(db)
    rows = dict(conn.execute("SELECT path, blake3 FROM members WHERE type = 'file'").fetchall())
    damaged = {m for (m,) in conn.execute("SELECT member FROM flags WHERE kind = 'damaged_member'")}
    assert after <= set(rows), sorted(after - set(rows))
    for name, digest in rows.items():  # every member indexed as it is, or flagged as one the damage reaches
        assert digest == blake3.blake3(members[name][1]).hexdigest() or name in damaged, name
    assert all(in_frames(*_span(members[n]), frames, hit) for n in damaged if n in members)  # "." is a folder
    details = [d for (d,) in conn.execute("SELECT detail FROM flags WHERE kind IN ('corrupt_frame', 'damaged_frame')")]
    assert any(f"compressed offset {frames[min(hit)][0]}" in d for d in details), details

    name = sorted(after)[-1]  # a member of the last frame, extracted and verified
    r = vault("--catalog", str(db), "extract", "exp02", name, "-o", str(tmp_path / "one"))
    assert r.code == 0, r.err
    assert (tmp_path / "one" / name).read_bytes() == members[name][1]
    r = vault("--catalog", str(db), "verify", "exp02")
    assert r.code == 5 and "all match" not in r.out
