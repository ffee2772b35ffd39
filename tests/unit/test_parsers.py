"""Parsers and planners, called without a disk: zstd headers, tar numbers and pax, listings, plans, secrets."""

from __future__ import annotations

import io
import re
import tarfile

import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudvault.archive.reader import frame_for_offset
from cloudvault.archive.tar import iter_members, parse_number, parse_pax
from cloudvault.archive.zstdframes import FrameStream, ZstdFormatError, frame_header_size
from cloudvault.index.listing import compare_listing, parse_listing
from cloudvault.index.plan import plan_index
from cloudvault.index.secrets import DEFAULT_RULES, SecretRules, SecretScanner, prefilter, top_level_branches
from cloudvault.models import FileStat, Frame


class Bytes:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        return out

    def read_some(self, n: int) -> bytes:
        return self.read(min(n, 700))  # short reads, as a real decoder gives


def test_frame_header_size_follows_rfc8878():
    assert frame_header_size(0b00100000) == 4 + 1 + 1  # single segment, 1-byte FCS
    assert frame_header_size(0b11000011) == 4 + 1 + 1 + 4 + 8
    assert frame_header_size(0) == 4 + 1 + 1


def test_frame_for_offset_is_a_binary_search():
    frames = [Frame(i * 10, 10, i * 100, 100) for i in range(50)]
    assert frame_for_offset(frames, 0).raw_offset == 0
    assert frame_for_offset(frames, 4999).raw_offset == 4900
    assert frame_for_offset(frames, 250).raw_offset == 200


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=5000), min_size=1, max_size=6), st.integers(1, 700))
def test_frame_stream_returns_exactly_the_decompressed_bytes(chunks, read_size):
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    blob = b"".join(cctx.compress(c) for c in chunks)
    stream = FrameStream(io.BytesIO(blob))
    out = b""
    while data := stream.read(read_size):
        out += data
    assert out == b"".join(chunks)
    assert [f.raw_size for f in stream.frames] == [len(c) for c in chunks]
    assert sum(f.comp_size for f in stream.frames) == len(blob)


def test_rle_bomb_is_decoded_in_bounded_pieces():
    import tracemalloc

    blob = zstandard.ZstdCompressor().compress(b"\0" * (256 << 20))
    assert len(blob) < 64 << 10
    tracemalloc.start()
    stream = FrameStream(io.BytesIO(blob))
    assert stream.read(1) == b"\0"
    total = 1
    while data := stream.read(1 << 20):
        total += len(data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert total == 256 << 20 and peak < 8 << 20


def test_not_zstd_and_truncated_streams_raise_named_errors():
    try:
        FrameStream(io.BytesIO(b"plain text")).read(10)
    except ZstdFormatError as exc:
        assert exc.kind == "not_zstd"
    blob = zstandard.ZstdCompressor().compress(bytes(range(256)) * 1000)
    try:
        FrameStream(io.BytesIO(blob[:-10])).read(10**7)
    except ZstdFormatError as exc:
        assert exc.kind == "truncated"
    else:
        raise AssertionError("truncated stream read without error")


def test_parse_number_reads_octal_and_base256():
    assert parse_number(b"0000644\0") == 0o644
    assert parse_number(b"        ") == 0
    big = 10**12
    field = bytes([0x80]) + big.to_bytes(11, "big")
    assert parse_number(field) == big


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.sampled_from(["path", "linkpath", "comment", "uname"]), st.text(min_size=1, max_size=300)))
def test_pax_records_round_trip(records):
    encoded = b""
    for key, value in records.items():
        body = f" {key}={value}\n".encode()
        n = len(body) + 1
        while len(str(n)) + len(body) != n:
            n = len(str(n)) + len(body)
        encoded += str(n).encode() + body
    assert parse_pax(encoded) == ([(k.encode(), v.encode()) for k, v in records.items()], None)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=200),
            st.binary(max_size=2000),
        ),
        min_size=1,
        max_size=5,
        unique_by=lambda t: t[0],
    ),
    st.sampled_from([tarfile.PAX_FORMAT, tarfile.GNU_FORMAT]),
)
def test_tar_parser_agrees_with_python_tarfile(members, fmt):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name.strip("/") or "x")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    stream = Bytes(buf.getvalue())
    got = [(h.name.decode(), b"".join(d.chunks())) for h, d in iter_members(stream)]
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as tar:
        want = [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]
    assert got == want


def test_listing_parser_reads_plain_and_verbose_tar_output():
    plain = b"./\n./logs/\n./logs/a.log\n"
    verbose = (
        b"-rw-r--r-- root/root      14 2026-09-25 10:00 ./logs/a.log\n"
        b"lrwxrwxrwx root/root 0 2026-09-25 10:00 ./l -> a\n"
    )
    assert parse_listing(plain) == [".", "logs", "logs/a.log"]
    assert parse_listing(verbose) == ["logs/a.log", "l"]
    assert compare_listing(["a", "b"], ["./b", "c"]) == (["a"], ["c"])


def _stat(path: str, size: int = 1, mtime: int = 1) -> FileStat:
    return FileStat(path, None, "file", size, mtime, 1, 1, 0o644)


def test_plan_separates_new_changed_unchanged_deleted():
    known = {"a": (1, 1, 1, 1), "b": (1, 1, 1, 1), "gone": (1, 1, 1, 1)}
    plan = plan_index([_stat("a"), _stat("b", size=2), _stat("new")], known)
    assert [s.path for s in plan.unchanged] == ["a"]
    assert [s.path for s in plan.changed] == ["b"]
    assert [s.path for s in plan.new] == ["new"]
    assert plan.deleted == ["gone"]


def test_secret_scanner_sees_a_token_split_across_chunks_and_keeps_no_value():
    rules = SecretRules(DEFAULT_RULES)
    scanner = SecretScanner(rules)
    text = b"line1\nline2\nexport HF_TOKEN=hf_" + b"A" * 34 + b"\n"
    for i in range(0, len(text), 7):
        scanner.feed(text[i : i + 7])
    assert [(h.rule, h.line) for h in scanner.hits][:1] == [("hf_token_assignment", 3)]
    assert "hf_AAAA" not in repr(scanner.hits) and "hf_AAAA" not in repr(scanner.findings())
    assert "hf_AAAA" not in rules.redact(text.decode())
    assert re.search(r"\[redacted \w+\]", rules.redact(text.decode()))


GITHUB = {"github": r"ghp_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40,}"}


def test_a_rule_with_a_top_level_bar_prefilters_on_every_branch():
    assert top_level_branches(r"a(b|c)[|]\|d|e") == [r"a(b|c)[|]\|d", "e"]
    assert prefilter(GITHUB) == (b"ghp_", b"github_pat_")
    assert prefilter({"any": r"(?i)token|secret"}) is None  # a branch with no literal: the regex always runs
    token = b"github_pat_" + b"Z" * 50
    for chunk_size in (7, 4096):
        scanner = SecretScanner(SecretRules(GITHUB))
        text = b"x" * 5000 + b"\nGH=" + token + b"\n"
        for i in range(0, len(text), chunk_size):
            scanner.feed(text[i : i + chunk_size])
        assert [(h.rule, h.line) for h in scanner.hits] == [("github", 2)]
        assert token.decode() not in repr(scanner.findings())


@given(st.sampled_from(["train.log.1", "env.bak", "run.stdout", "job.err", "job.out", "notes", "x.json"]))
def test_text_is_scanned_whatever_its_name_and_binary_is_not(name):
    rules = SecretRules(DEFAULT_RULES)
    assert rules.scanner(name.encode(), 100, b"HF_TOKEN=abc\n") is not None
    assert rules.scanner(name.encode(), 100, b"\0\1binary") is None
    assert rules.scanner(b"dumps/scores.bin", 100, b"looks like text") is None  # a dump, whatever its bytes


def test_parallel_stream_gives_the_same_bytes_and_frames_and_stops_early(tmp_path):
    import time
    from functools import partial

    from cloudvault.archive.zstdframes import ParallelFrameStream

    chunks = [bytes([i]) * (300_000 + i) for i in range(12)]
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    path = tmp_path / "f.zst"
    path.write_bytes(b"".join(cctx.compress(c) for c in chunks))
    with open(path, "rb") as fh:
        stream = ParallelFrameStream(fh, partial(open, path, "rb"))
        out = b"".join(iter(lambda: stream.read_some(70_000), b""))
        stream.close()
    assert out == b"".join(chunks)
    assert [f.raw_size for f in stream.frames] == [len(c) for c in chunks]
    big = tmp_path / "big.zst"
    big.write_bytes(cctx.compress(bytes(range(256)) * 400_000))
    with open(big, "rb") as fh:
        stream = ParallelFrameStream(fh, partial(open, big, "rb"))
        assert len(stream.read(10)) == 10
        started = time.monotonic()
        stream.close()  # the reader gives up after 10 bytes: threads end promptly
    assert time.monotonic() - started < 2


def test_multi_frame_guess_from_the_first_bytes():
    from cloudvault.archive.zstdframes import looks_multi_frame

    small = zstandard.ZstdCompressor().compress(b"x" * 1000)  # content size recorded: 1000
    assert looks_multi_frame(small + small * 50, len(small) * 51)
    cobj = zstandard.ZstdCompressor().compressobj()
    streamed = cobj.compress(b"x" * 1000) + cobj.flush()  # streamed: no content size recorded
    assert len(streamed) > 6 and not looks_multi_frame(streamed, 10**9)
    assert looks_multi_frame(b"\x50\x2a\x4d\x18" + bytes(8), 100)  # pzstd's leading skippable frame
    assert not looks_multi_frame(b"not zstd at all", 100)


def test_frame_stream_read_zero_does_not_end_the_frame():
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    parts = [b"a" * 1000, b"b" * 1000]
    stream = FrameStream(io.BytesIO(b"".join(cctx.compress(p) for p in parts)))
    assert stream.read(10) == b"a" * 10
    assert stream.read(0) == b""
    assert stream.read_some(0) == b""
    assert stream.read(2000) == b"a" * 990 + b"b" * 1000
    assert [f.raw_size for f in stream.frames] == [1000, 1000]


def test_a_file_named_tar_zst_that_is_another_format_is_named(tmp_path):
    import bz2
    import gzip
    import lzma

    from cloudvault.archive.zstdframes import sniff_format

    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as t:
        t.addfile(tarfile.TarInfo("x"), io.BytesIO(b""))
    cases = {"gzip": gzip.compress(tar.getvalue()), "xz": lzma.compress(tar.getvalue()),
             "bzip2": bz2.compress(tar.getvalue()), "uncompressed tar": tar.getvalue()}  # fmt: skip
    for name, blob in cases.items():
        assert name in sniff_format(blob[:512])
        try:
            FrameStream(io.BytesIO(blob)).read(10)
        except ZstdFormatError as exc:
            assert exc.kind == "not_zstd" and name in str(exc) and "0x" not in str(exc)
        else:
            raise AssertionError(f"{name} read as zstd")
    assert sniff_format(b"plain text, no magic") is None


WORDS = st.text(st.sampled_from("abcxyz_"), min_size=3, max_size=6)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(WORDS, min_size=1, max_size=3), min_size=1, max_size=3), st.integers(1, 64), st.data())
def test_the_prefilter_never_hides_a_match(rule_branches, chunk_size, data):
    """Rules whose regex is a top-level alternation of literals followed by [a-z]+: the scanner with its prefilter
    finds exactly what the bare regex finds, chunk boundaries or not."""
    rules = SecretRules({f"r{i}": "|".join(f"{w}[a-z]+" for w in branches) for i, branches in enumerate(rule_branches)})
    words = [w for branches in rule_branches for w in branches]
    piece = st.one_of(st.sampled_from(words), st.sampled_from(["a", "z", " ", "\n", "_x"]))
    text = "".join(data.draw(st.lists(piece, max_size=30))).encode()
    scanner = SecretScanner(rules)
    for i in range(0, len(text), chunk_size):
        scanner.feed(text[i : i + chunk_size])
    bare = SecretScanner(rules)
    object.__setattr__(rules, "literals", ())  # no prefilter: the regex runs on every chunk
    for i in range(0, len(text), chunk_size):
        bare.feed(text[i : i + chunk_size])
    assert {(h.rule, h.line) for h in scanner.hits} == {(h.rule, h.line) for h in bare.hits}


def test_big_files_hash_the_same_by_mmap_and_by_stream(tmp_path):
    import os

    import blake3

    from cloudvault.hashing import MMAP_THRESHOLD, BackgroundHasher, hash_file, hash_stream

    data = os.urandom(MMAP_THRESHOLD + 12345)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    want = blake3.blake3(data).hexdigest()
    with open(path, "rb") as fh:
        assert hash_file(path) == hash_file(os.fsencode(path)) == hash_stream(fh) == want
    background = BackgroundHasher()
    for i in range(0, len(data), 777_777):
        background.update(data[i : i + 777_777])
    assert background.hexdigest() == want


def test_a_recipe_schema_names_the_bad_key_in_one_line_required_or_not():
    """cloudvault.recipe.check, the one schema check every recipe kind's loader uses (Required marks a key that
    must be there; a nested dict is a table; ANY a table of free keys)."""
    import pytest

    from cloudvault.errors import RecipeInvalid
    from cloudvault.recipe import ANY, Required, check

    schema = {"entry": Required(str), "gpus": int, "margin": float, "run": Required({"program": Required(str)}),
              "env": {ANY: str}, "noise": (int, float, dict)}  # fmt: skip
    check({"entry": "015", "run": {"program": "p"}, "margin": 1, "env": {"A": "1"}, "noise": {}}, schema, "r.toml")
    for data, said in [
        ({"run": {"program": "p"}}, "missing required key 'entry'"),
        ({"entry": "015"}, "missing required key 'run'"),
        ({"entry": "015", "run": {}}, "missing required key run.'program'"),
        ({"entry": "015", "run": {"program": "p"}, "gpu": 1}, "unknown key 'gpu' (known: entry, gpus, margin"),
        ({"entry": "015", "run": {"program": "p"}, "gpus": True}, "'gpus' must be int, not bool"),
        ({"entry": "015", "run": "p"}, "'run' must be a table"),
        ({"entry": "015", "run": {"program": "p"}, "env": {"A": 1}}, "'env.A' must be str, not int"),
        ({"entry": "015", "run": {"program": "p"}, "noise": "x"}, "'noise' must be int or float or dict, not str"),
    ]:
        with pytest.raises(RecipeInvalid) as refused:
            check(data, schema, "r.toml")
        assert refused.value.message.startswith(f"recipe r.toml: {said}"), refused.value.message
