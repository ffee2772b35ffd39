"""archive/zip.py: zips read through their central directory, as unzip and zipfile read them; damage and hostile
zips named as flags, the readable part kept."""

from __future__ import annotations

import io
import json
import os
import subprocess
import zipfile

import blake3
import pytest
from conftest import require
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zips import conda_package, hand_zip, partly_encrypted_zip, python_zip, unzip_hash, unzip_names, with_methods

from cloudvault.archive.zip import ZipReader, ZipScan
from tests.pieces_oracle import blob_length


def _scan(path):
    with open(path, "rb") as fh:
        scan = ZipScan(fh)
        records = list(scan)
    return records, scan.result


def _read_back(path, frames, rec) -> bytes:
    reader = ZipReader(open(path, "rb"), frames)  # noqa: SIM115 (closed below)
    try:
        return b"".join(bytes(c) for c in reader.chunks(rec.data_offset, rec.size))
    finally:
        reader.close()


def _flags(result):
    return {(f.kind, f.member) for f in result.flags}


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_python_zipfile_members_match_unzip_and_read_back_by_frame(tmp_path, method):
    require("unzip")
    members = {"a.txt": b"alpha\n" * 1000, "sub/b.bin": os.urandom(3 << 20), "empty": b"", "sub/c/": b""}
    archive = python_zip(tmp_path / "p.zip", members, method)
    records, result = _scan(archive)
    assert result.status == "ok" and not result.flags
    assert sorted(r.raw_path or r.path.encode() for r in records) == sorted(unzip_names(archive))
    for rec in records:
        if rec.type == "file":
            name = rec.path.encode()
            assert rec.blake3 == blake3.blake3(members[rec.path]).hexdigest()
            if rec.size:  # bsdtar fails an empty LZMA member; unzip 6 has no LZMA at all
                tool = "bsdtar" if method == zipfile.ZIP_LZMA else "unzip"
                assert rec.blake3 == unzip_hash(archive, name, tool)
            assert _read_back(archive, result.frames, rec) == members[rec.path]
    if method != zipfile.ZIP_LZMA:  # a DOS time is local time, as unzip sets it on what it extracts
        subprocess.run(["unzip", "-q", str(archive), "-d", str(tmp_path / "ref")], check=True)
        for rec in records:
            if rec.type == "file":
                assert rec.mtime == int((tmp_path / "ref" / rec.path).stat().st_mtime), rec.path
    big = next(r for r in records if r.path == "sub/b.bin")
    assert big.pieces is not None and len(big.pieces) == blob_length(3)
    assert next(r for r in records if r.path == "sub/c").type == "dir"


def test_zstd_method_93_is_read(tmp_path):
    data = b"zstd inside a zip\n" * 5000
    archive = hand_zip(tmp_path / "z.zip", [{"name": b"z.txt", "data": data, "method": 93}])
    records, result = _scan(archive)
    assert result.status == "ok" and records[0].blake3 == blake3.blake3(data).hexdigest()
    assert _read_back(archive, result.frames, records[0]) == data


def test_zip64_with_more_than_65535_entries(tmp_path):
    require("unzip")
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        for i in range(70_000):
            zf.writestr(f"d/{i}", str(i))
    records, result = _scan(archive)
    assert result.status == "ok" and len(records) == 70_000 == len(unzip_names(archive))
    last = records[-1]
    assert last.path == "d/69999" and _read_back(archive, result.frames, last) == b"69999"


def test_truncated_zip_keeps_the_members_before_the_cut(tmp_path):
    members = {f"m{i}.txt": os.urandom(4000) for i in range(10)}
    whole = python_zip(tmp_path / "w.zip", members, zipfile.ZIP_STORED)
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole.read_bytes()[:20_000])
    records, result = _scan(cut)
    assert result.status == "truncated"
    assert any(f.kind == "truncated" for f in result.flags)
    hashed = {r.path: r.blake3 for r in records if r.blake3}
    assert len(hashed) == 4
    assert all(hashed[p] == blake3.blake3(members[p]).hexdigest() for p in hashed)


def test_bad_crc_is_flagged_and_the_member_keeps_no_hash(tmp_path):
    archive = hand_zip(tmp_path / "c.zip", [{"name": b"good", "data": b"fine"},
                                            {"name": b"bad", "data": b"rotten", "crc": 1234}])  # fmt: skip
    records, result = _scan(archive)
    assert ("bad_crc", "bad") in _flags(result)
    by = {r.path: r for r in records}
    assert by["bad"].blake3 is None and by["good"].blake3 == blake3.blake3(b"fine").hexdigest()


def test_central_directory_disagreeing_with_local_header_is_flagged_and_the_central_name_listed(tmp_path):
    """Which name does the mirror hold? Vault lists what the central directory says (as unzip -l does) and flags
    the member; its bytes are never handed out (catalog/flagged.py refuses them)."""
    require("unzip")
    archive = hand_zip(tmp_path / "m.zip", [{"name": b"report.txt", "data": b"x", "local_name": b"evil.sh"},
                                            {"name": b"sized", "data": b"abc", "local_size": 2}])  # fmt: skip
    records, result = _scan(archive)
    assert [r.path for r in records] == ["report.txt", "sized"]
    assert [n for n in unzip_names(archive)] == [b"report.txt", b"sized"]
    flags = _flags(result)
    assert ("zip_header_mismatch", "report.txt") in flags and ("zip_header_mismatch", "sized") in flags
    assert all(r.blake3 is None for r in records)  # no hash to match: no read path hands their bytes out


def test_overlapping_entries_are_flagged(tmp_path):
    archive = hand_zip(tmp_path / "o.zip", [{"name": b"one", "data": b"shared bytes"},
                                            {"name": b"two", "data": b"shared bytes", "at": 0}])  # fmt: skip
    records, result = _scan(archive)
    assert ("zip_overlap", "two") in _flags(result)
    by = {r.path: r for r in records}
    assert by["one"].blake3 == blake3.blake3(b"shared bytes").hexdigest() and by["two"].blake3 is None


def test_zip_bomb_is_refused_by_ratio_and_size_in_one_line(tmp_path):
    kernel = bytes(10 << 20)
    entries = [{"name": b"k0", "data": kernel, "method": 8}]
    entries += [{"name": f"k{i}".encode(), "data": kernel, "method": 8, "at": 0} for i in range(1, 250)]
    archive = hand_zip(tmp_path / "bomb.zip", entries)
    records, result = _scan(archive)
    assert result.status == "zip_bomb"
    bomb = [f for f in result.flags if f.kind == "zip_bomb"]
    assert len(bomb) == 1 and "\n" not in bomb[0].detail and "refused" in bomb[0].detail
    assert len(records) == 250 and all(r.blake3 is None for r in records)


def test_zip_slip_names_and_links_out_are_flagged(tmp_path):
    require("zip")
    archive = python_zip(tmp_path / "s.zip", {"../escape.txt": b"x", "/etc/evil": b"y", "ok.txt": b"z"})
    (tmp_path / "src").mkdir()
    os.symlink("/etc", tmp_path / "src/etc_link")
    subprocess.run(["zip", "-q", "-y", str(archive), "etc_link"], cwd=tmp_path / "src", check=True)
    records, result = _scan(archive)
    unsafe = {m for kind, m in _flags(result) if kind == "unsafe_member"}
    assert {"../escape.txt", "/etc/evil", "etc_link"} <= unsafe and "ok.txt" not in unsafe
    link = next(r for r in records if r.path == "etc_link")
    assert link.type == "symlink" and link.link_target == "/etc"


def test_encrypted_zip_is_a_format_vault_does_not_open(tmp_path):
    require("zip")
    (tmp_path / "src").mkdir()
    (tmp_path / "src/secret.txt").write_text("hidden")
    archive = tmp_path / "e.zip"
    subprocess.run(["zip", "-q", "-P", "pw", str(archive), "secret.txt"], cwd=tmp_path / "src", check=True)
    records, result = _scan(archive)
    assert result.status == "unsupported"
    assert [f.kind for f in result.flags] == ["unsupported_format"] and "encrypted" in result.flags[0].detail
    assert [r.path for r in records] == ["secret.txt"] and records[0].blake3 is None


@pytest.mark.parametrize("encrypted_first", [True, False], ids=["encrypted_first", "plain_first"])
def test_a_partly_encrypted_zip_is_read_member_by_member(tmp_path, encrypted_first):
    """Each encrypted member is flagged by name, listed with the size the central directory says and no hash; the
    zip's other members are hashed as `unzip -p` gives them."""
    require("zip")
    require("unzip")
    archive = partly_encrypted_zip(tmp_path / "src", tmp_path / "a.zip", encrypted_first)
    records, result = _scan(archive)
    listed = subprocess.run(["unzip", "-l", str(archive)], capture_output=True, text=True, check=True).stdout
    assert (
        sorted(r.path.encode() for r in records)
        == sorted(unzip_names(archive))
        == [b"key.txt", b"plain.txt", b"secret.txt"]
    )
    by_name = {r.path: r for r in records}
    assert result.status == "ok"
    assert _flags(result) == {("encrypted_member", "secret.txt"), ("encrypted_member", "key.txt")}
    for name in ("secret.txt", "key.txt"):
        assert by_name[name].blake3 is None and f"{by_name[name].size}  " in listed
    assert by_name["secret.txt"].size == 7 and by_name["key.txt"].size == 12
    plain = by_name["plain.txt"]
    assert plain.blake3 == unzip_hash(archive, b"plain.txt")
    assert _read_back(archive, result.frames, plain) == b"for everyone\n"


def test_a_wholly_encrypted_zip_with_a_folder_is_still_a_format_vault_does_not_open(tmp_path):
    require("zip")
    (tmp_path / "src/dir").mkdir(parents=True)
    (tmp_path / "src/dir/secret.txt").write_text("hidden")
    archive = tmp_path / "e.zip"
    subprocess.run(["zip", "-q", "-r", "-P", "pw", str(archive), "dir"], cwd=tmp_path / "src", check=True)
    records, result = _scan(archive)
    assert result.status == "unsupported" and [f.kind for f in result.flags] == ["unsupported_format"]
    assert [r.path for r in records] == ["dir", "dir/secret.txt"]


def test_members_in_methods_vault_does_not_read_are_flagged_by_method_and_the_rest_read(tmp_path):
    """Deflate64 (9), PPMd (98), AES (99) without its encryption bit, and a method no one defined: each member is
    flagged with the method's name, kept without a hash; the stored member beside them is read."""
    members = {name: name.encode() * 50 for name in ("d64.bin", "ppmd.bin", "aes.bin", "odd.bin", "plain.txt")}
    archive = python_zip(tmp_path / "m.zip", members, zipfile.ZIP_STORED)
    with_methods(archive, {"d64.bin": 9, "ppmd.bin": 98, "aes.bin": 99, "odd.bin": 4711})
    records, result = _scan(archive)
    assert result.status == "ok"
    by_member = {f.member: f for f in result.flags}
    assert {f.kind for f in result.flags} == {"unsupported_method"} and len(result.flags) == 4
    from cloudvault.archive.zip import unread_method

    assert {m: unread_method(f.detail) for m, f in by_member.items()} == {
        "d64.bin": "Deflate64", "ppmd.bin": "PPMd", "aes.bin": "AES", "odd.bin": "method 4711"}  # fmt: skip
    by_name = {r.path: r for r in records}
    assert all(by_name[name].blake3 is None for name in by_member)
    assert by_name["plain.txt"].blake3 == blake3.blake3(members["plain.txt"]).hexdigest()


def test_every_kind_a_members_data_is_flagged_with_is_refused_by_the_read_path():
    from cloudvault.archive.zip import MEMBER_DAMAGE, MEMBER_UNREAD
    from cloudvault.catalog.flagged import ZIP_REFUSED
    from cloudvault.index.context import DAMAGE

    assert set(MEMBER_DAMAGE) | set(MEMBER_UNREAD) <= set(ZIP_REFUSED)
    assert set(ZIP_REFUSED) - set(MEMBER_UNREAD) <= DAMAGE and not set(MEMBER_UNREAD) & DAMAGE


def test_a_zip_streamed_to_stdout_sizes_after_the_data_is_read_by_its_central_directory(tmp_path):
    """`zip - ...` cannot seek back: each member's sizes and CRC follow its data (a data descriptor), its local
    header says zero, as in jars made by streaming tools; the central directory has them."""
    require("zip")
    require("unzip")
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.txt").write_bytes(b"streamed " * 5000)
    (tmp_path / "src/b.bin").write_bytes(os.urandom(200_000))
    archive = tmp_path / "streamed.zip"
    streamed = subprocess.run(
        ["zip", "-q", "-", "a.txt", "b.bin"], cwd=tmp_path / "src", capture_output=True, check=True
    )
    archive.write_bytes(streamed.stdout)  # through a pipe: zip cannot seek back
    with zipfile.ZipFile(archive) as zf:
        assert all(info.flag_bits & 8 for info in zf.infolist())
    records, result = _scan(archive)
    assert result.status == "ok" and not result.flags, result.flags
    for rec in records:
        assert rec.blake3 == unzip_hash(archive, rec.path.encode())
        assert _read_back(archive, result.frames, rec) == (tmp_path / "src" / rec.path).read_bytes()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
       end=st.integers(0, 10_000), method=st.sampled_from([0, 8, 12, 14, 93, "conda", "streamed"]))  # fmt: skip
def test_a_damaged_zip_is_flagged_never_raised(tmp_path, cuts, end, method):
    """Bytes of a real zip changed or cut anywhere: the scan ends, flags what it found, and raises nothing; a
    member it keeps a hash of is one whose bytes are those zipfile wrote."""
    members = {"a.txt": b"alpha " * 300, "d/": b"", "b.bin": bytes(range(256)) * 20, "c": b"x"}
    if method == 93:  # zipfile writes no zstd: by hand
        made = hand_zip(tmp_path / "z.zip", [{"name": k.encode(), "data": v, "method": 93} for k, v in members.items()])
    elif method == "streamed":  # written where zipfile cannot seek back: sizes after the data
        made = tmp_path / "z.zip"
        made.write_bytes(_streamed_zip(members))
    elif method == "conda":  # stored .tar.zst streams inside, read again as archives
        made = conda_package(tmp_path / "z.conda", "p-1-0", {k: v for k, v in members.items() if v}, {"info/i": b"{}"})
        members.update({"metadata.json": json.dumps({"conda_pkg_format_version": 2}).encode(), "info/i": b"{}"})
    else:
        made = python_zip(tmp_path / "z.zip", members, method)
    data = bytearray(made.read_bytes())
    for at, value in cuts:
        if at < len(data):
            data[at] = value
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(bytes(data[: max(end, 1)] if end < len(data) else data))
    records, result = _scan(damaged)
    truth = {blake3.blake3(v).hexdigest(): v for v in members.values()}
    for rec in records:
        if rec.blake3 is not None and rec.type == "file" and not rec.path.endswith(".tar.zst"):
            assert rec.blake3 in truth and _read_back(damaged, result.frames, rec) == truth[rec.blake3]


@pytest.mark.parametrize("adjusted", [False, True], ids=["as_is", "zip_-A"])
def test_a_zip_after_a_stub_self_extractor_is_read(tmp_path, adjusted):
    """Bytes before the zip (a self-extractor's stub), its offsets as written or adjusted by `zip -A`."""
    require("zip")
    require("unzip")
    members = {"a.txt": b"after the stub\n" * 100, "b.bin": os.urandom(5000)}
    plain = python_zip(tmp_path / "p.zip", members)
    archive = tmp_path / "sfx.zip"
    archive.write_bytes(b"#!/bin/sh\nexit 0\n" + os.urandom(1000) + plain.read_bytes())
    if adjusted:
        subprocess.run(["zip", "-q", "-A", str(archive)], check=True)
    records, result = _scan(archive)
    assert result.status == "ok" and not result.flags, result.flags
    for rec in records:
        assert rec.blake3 == unzip_hash(archive, rec.path.encode()) == blake3.blake3(members[rec.path]).hexdigest()
        assert _read_back(archive, result.frames, rec) == members[rec.path]


def test_progress_is_told_member_by_member_and_adds_up_to_the_file(tmp_path):
    archive = python_zip(tmp_path / "p.zip", {f"m{i}": os.urandom(100_000) for i in range(5)}, zipfile.ZIP_STORED)
    told: list[int] = []
    with open(archive, "rb") as fh:
        scan = ZipScan(fh, on_bytes=told.append)
        for n, _ in enumerate(scan, 1):
            assert sum(told) >= n * 100_000  # told as each member is read, not all at the end
    assert sum(told) == archive.stat().st_size


def test_a_streamed_zip_cut_short_keeps_the_members_before_the_cut(tmp_path):
    """Sizes after each member's data (zip through a pipe) and no central directory: each member is decoded to
    find its end, its data descriptor read there; the member the cut reaches is not listed."""
    require("zip")
    (tmp_path / "src").mkdir()
    members = {f"m{i}.txt": (f"line {i}\n" * 3000).encode() + os.urandom(3000) for i in range(4)}
    for name, data in members.items():
        (tmp_path / "src" / name).write_bytes(data)
    streamed = subprocess.run(["zip", "-q", "-", *members], cwd=tmp_path / "src", capture_output=True, check=True)
    with zipfile.ZipFile(io.BytesIO(streamed.stdout)) as zf:
        last = zf.getinfo("m3.txt")
    cut = tmp_path / "cut.zip"
    cut.write_bytes(streamed.stdout[: last.header_offset + 100])  # inside m3.txt's data
    records, result = _scan(cut)
    assert result.status == "truncated"
    assert {r.path: r.blake3 for r in records} == {
        name: blake3.blake3(members[name]).hexdigest() for name in ("m0.txt", "m1.txt", "m2.txt")
    }
    assert all(_read_back(cut, result.frames, r) == members[r.path] for r in records)


def _streamed_zip(members: dict[str, bytes]) -> bytes:
    """A deflated zip zipfile writes to a stream it cannot seek: each member's data descriptor after its data."""

    class Pipe(io.RawIOBase):
        def __init__(self) -> None:
            self.data = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, b) -> int:
            self.data += b
            return len(b)

    pipe = Pipe()
    with zipfile.ZipFile(pipe, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return bytes(pipe.data)
