"""What the speed work (issue 9) must never change: every member's BLAKE3, the archive's BLAKE3 and the frame
table, for every archive shape the tests build, checked against answers computed without vault's code (GNU
`tar -x` then `b3sum`, `b3sum` of the file, and a walk of the zstd frame headers written here), with the
serial, threaded and parallel decoders alike. Also the secret scanner's hits on chunk boundaries."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from archives import COMPRESSORS, compress, extracted_hashes, gnu_tar, make_tree, python_tar
from conftest import require
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudvault.archive.scan import ArchiveScan, member_path
from cloudvault.index.secrets import DEFAULT_RULES, SecretRules

SHAPES = [(fmt, how) for fmt in ("gnu", "posix", "oldgnu") for how in COMPRESSORS]
SHAPES += [("gnu", "python"), ("posix", "python"), ("python", "pzstd"), ("python", "zstd")]


def b3sum(path: Path) -> str:
    out = subprocess.run(["b3sum", "--no-names", str(path)], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def walk_frames(path: Path) -> list[tuple[int, int, int]]:
    """(compressed offset, compressed size, decompressed size) of every zstd frame, from its headers alone (RFC
    8878); decompressed sizes by decoding each frame on its own with the zstd tool."""
    data = path.read_bytes()
    frames, at = [], 0
    while at < len(data):
        (magic,) = struct.unpack_from("<I", data, at)
        if 0x184D2A50 <= magic <= 0x184D2A5F:  # skippable (pzstd's index)
            at += 8 + struct.unpack_from("<I", data, at + 4)[0]
            continue
        assert magic == 0xFD2FB528
        fhd = data[at + 4]
        single = (fhd >> 5) & 1
        fcs = (0, 2, 4, 8)[fhd >> 6] or (1 if single else 0)
        pos = at + 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3] + fcs
        while True:
            header = int.from_bytes(data[pos : pos + 3], "little")
            pos += 3 + (1 if (header >> 1) & 3 == 1 else header >> 3)
            if header & 1:
                break
        pos += 4 if fhd & 4 else 0
        raw = subprocess.run(["zstd", "-dc", "--long=31"], input=data[at:pos], capture_output=True, check=True)
        frames.append((at, pos - at, len(raw.stdout)))
        at = pos
    return frames


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> list[Path]:
    for tool in ("tar", "zstd", "pzstd", "b3sum"):
        require(tool)
    base = tmp_path_factory.mktemp("speed")
    src = make_tree(base / "src", big=5 << 20)
    (src / "logs/secrets.log").write_bytes(b"x\n" * 600_000 + b"HF_TOKEN=hf_" + b"a" * 34 + b"\n")
    out = []
    for fmt, how in SHAPES:
        tar_path = base / f"{fmt}.tar"
        if not tar_path.exists():
            python_tar(src, tar_path) if fmt == "python" else gnu_tar(src, tar_path, fmt)
        out.append(compress(tar_path, base / f"{fmt}_{how}.tar.zst", how))
    return out


@pytest.mark.parametrize("mode", ["threaded", "parallel"])
def test_every_shape_hashes_and_frames_equal_independent_tools(shapes, tmp_path, mode):
    rules = SecretRules(DEFAULT_RULES)
    for archive in shapes:
        with open(archive, "rb") as fh:
            opener = partial(open, archive, "rb") if mode == "parallel" else None
            scan = ArchiveScan(fh, inspect=rules.scanner, opener=opener)
            records = list(scan)
        result = scan.result
        assert result.status == "ok", archive.name
        assert result.blake3 == b3sum(archive), archive.name
        want = walk_frames(archive)
        assert [(f.comp_offset, f.comp_size, f.raw_size) for f in result.frames] == want, archive.name
        assert [f.raw_offset for f in result.frames] == [sum(w[2] for w in want[:i]) for i in range(len(want))]
        expected = extracted_hashes(archive, tmp_path / archive.name)
        got, by_path = {}, {rec.path: rec for rec in records}
        for rec in records:
            if rec.type in ("file", "hardlink"):  # a hardlink's bytes are its target's
                digest = rec.blake3 if rec.type == "file" else by_path[rec.link_target].blake3
                raw = rec.raw_path if rec.raw_path is not None else rec.path.encode()
                got[os.path.normpath(raw.removeprefix(b"./"))] = digest
        assert got == expected, archive.name
        secret = [f for f in result.flags if f.kind == "secret"]
        assert [(f.member, f.detail) for f in secret] == [
            ("logs/secrets.log", "hf_token_assignment at line 600001 (value not stored)")
        ], archive.name


def test_member_path_is_unchanged():
    assert member_path(b"./a/b/") == ("a/b", b"./a/b/")


@pytest.mark.parametrize("split", [0, 1, 5, 13, 100, 511, 512, 513, 700, 4095])
def test_a_secret_split_anywhere_between_chunks_is_found_on_its_line(split):
    rules = SecretRules(DEFAULT_RULES)
    text = b"a\n" * 40 + b"key AKIA" + b"A" * 16 + b" tail\n" + b"-----BEGIN RSA PRIVATE KEY-----\n" + b"z" * 900
    for at in range(0, len(text), 37):
        scanner = rules.scanner(b"f.txt", len(text), text)
        cut = min(at + split, len(text))
        for chunk in (text[:at], text[at:cut], text[cut:]):
            if chunk:
                scanner.feed(chunk)
        assert [(h.rule, h.line) for h in scanner.hits] == [("aws_access_key", 41), ("private_key", 42)], at


def test_header_checksums_unsigned_signed_and_wrong():
    import tarfile

    from cloudvault.archive.tar import checksum_ok

    block = bytearray(tarfile.TarInfo("caf\xe9/\xff" * 3).tobuf(tarfile.GNU_FORMAT, "latin-1"))[:512]
    assert checksum_ok(bytes(block))  # tarfile writes the unsigned sum
    field = block[:148] + b" " * 8 + block[156:]
    signed = sum(b - 256 if b > 127 else b for b in field)
    block[148:156] = b"%06o\0 " % signed
    assert checksum_ok(bytes(block))  # as some old tars wrote it
    block[148:156] = b"%06o\0 " % (signed + 1)
    assert not checksum_ok(bytes(block))


def test_vault_extract_start_up_imports_no_thread_or_ctypes_machinery():
    """queue, concurrent.futures and ctypes serve only the indexer; `vault extract` must not pay for them."""
    import sys

    code = (
        "import sys, cloudvault.cli.main, cloudvault.cli.extract, cloudvault.extract, cloudvault.io.members;"
        "print(sorted({'queue', 'concurrent.futures', 'ctypes'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=9000), st.lists(st.tuples(st.integers(0, 9000), st.integers(0, 4)), max_size=3))
def test_literal_search_engines_agree_with_a_plain_search(noise, inserts):
    """Hyperscan's one-pass pre-check (a dependency on x86-64 Linux) and the per-literal memmem fallback both say
    exactly whether a literal is there, wherever it lies (either side of the 4 KiB small-data cut, at the ends)."""
    from cloudvault.index.secrets import LiteralSearch

    literals = SecretRules(DEFAULT_RULES).literals
    data = bytearray(noise)
    for at, which in inserts:
        data[min(at, len(data)) : min(at, len(data))] = literals[which]
    data = bytes(data)
    want = any(literal in data for literal in literals)
    assert LiteralSearch(literals, "hyperscan")(data) is want
    assert LiteralSearch(literals, "memmem")(data) is want


def test_the_index_pre_check_uses_hyperscan_where_it_is_a_dependency():
    rules = SecretRules(DEFAULT_RULES)
    assert rules.may_match(b"x" * 5000 + b"AKIA") and not rules.may_match(b"x" * 5000)
    assert rules.search.engine == "hyperscan"


def test_the_extract_path_imports_nothing_it_does_not_use():
    """`vault extract`'s start-up (issue 9: at most 1.4x the import floor) stays lean: none of these modules is
    loaded by the modules extract runs (measured against the modules loaded before them)."""
    code = (
        "import sys; before = set(sys.modules); import cloudvault.cli.main, cloudvault.cli.extract, "
        "cloudvault.extract, cloudvault.io.members, "
        "cloudvault.catalog.db, cloudvault.config, cloudvault.archive.reader;"
        "print(sorted({'pathlib', 'shutil', 'urllib.parse', 'gettext', 'signal', 'queue', 'threading', 'ctypes',"
        " 'cloudvault.hashing', 'cloudvault.archive.zstdframes', 'rich', 'bz2', 'lzma', 'zlib', 'json'}"
        " & (set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=512, max_size=512))
def test_byte_sum_equals_sum_of_the_bytes(block):
    """The header checksum's C byte sum (Adler-32 and a remainder by 255) against sum(), on random blocks and on a
    block of every possible total from 0 to 512 * 255."""
    from cloudvault.archive.tar import byte_sum

    assert byte_sum(block) == sum(block)


def test_byte_sum_is_exact_for_every_total():
    from cloudvault.archive.tar import byte_sum

    for total in range(512 * 255 + 1):
        full, rest = divmod(total, 255)
        block = (b"\xff" * full + bytes([rest]) + bytes(511 - full))[:512] if full < 512 else b"\xff" * 512
        assert byte_sum(block) == total, total


def test_without_hyperscan_the_pre_check_falls_back_to_memmem(monkeypatch):
    """Where Hyperscan has no wheel (not x86-64 Linux), the import fails and the per-literal search answers."""
    monkeypatch.setitem(sys.modules, "hyperscan", None)  # `import hyperscan` now raises ImportError
    rules = SecretRules(DEFAULT_RULES)
    assert rules.may_match(b"x" * 5000 + b"-----BEGIN RSA PRIVATE KEY-----") and not rules.may_match(b"x" * 5000)
    assert rules.search.engine == "memmem"
