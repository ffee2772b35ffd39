"""The line search of one stream, fed in chunks of any size, against GNU grep over the same bytes."""

from __future__ import annotations

import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from cloudvault.grep.lines import LineSearch, Shape
from cloudvault.grep.pattern import Pattern

WORDS = [b"alpha", b"beta", b"loss=0.5", b"", b"ALPHA", b"x", b"alphabet", b"step 7"]
lines = st.lists(st.lists(st.sampled_from(WORDS), max_size=4).map(b" ".join), max_size=30)


def ours(pattern: str, data: bytes, shape: Shape, chunk: int, **kw) -> list[str]:
    search = LineSearch(Pattern(pattern, **kw), shape, lambda text: text)
    for at in range(0, len(data), chunk):
        search.feed(data[at : at + chunk])
    search.finish()
    return [h.kind if h.kind == "--" else f"{h.line}{h.kind}{h.offset}{h.kind}{h.text.decode()}" for h in search.hits]


def gnu(pattern: str, data: bytes, args: list[str]) -> list[str]:
    out = subprocess.run(["grep", "-a", "-n", "-b", "-E", *args, "--", pattern], input=data, capture_output=True)
    return out.stdout.decode().splitlines()


@settings(max_examples=150, deadline=None)
@given(
    lines,
    st.sampled_from(["alpha", "^alpha", "beta$", "a.p", r"\bx\b", "loss=[0-9.]+", "^$"]),
    st.integers(1, 40),
    st.tuples(st.integers(0, 2), st.integers(0, 2), st.booleans(), st.integers(0, 3)),
    st.booleans(),
    st.booleans(),
)
def test_lines_and_context_agree_with_gnu_grep(rows, pattern, chunk, options, nl, case):
    before, after, invert, max_count = options
    data = b"\n".join(rows) + (b"\n" if nl and rows else b"")
    args = ([f"-B{before}"] if before else []) + ([f"-A{after}"] if after else [])  # -A0 prints `--` in GNU grep
    args += (["-v"] if invert else []) + (["-i"] if case else [])
    args += [f"-m{max_count}"] if max_count else []
    shape = Shape(invert=invert, max_count=max_count, before=before, after=after)
    assert ours(pattern, data, shape, chunk, ignore_case=case) == gnu(pattern, data, args)


@settings(max_examples=60, deadline=None)
@given(lines, st.sampled_from(["alpha", "beta", "[0-9]", "(a)\\1"]), st.integers(1, 50), st.booleans())
def test_counts_agree_with_gnu_grep_and_backreferences_fall_back_to_re(rows, pattern, chunk, invert):
    data = b"\n".join(rows)
    search = LineSearch(Pattern(pattern), Shape(invert=invert, keep_lines=False), lambda text: text)
    for at in range(0, len(data), chunk):
        search.feed(data[at : at + chunk])
    search.finish()
    want = gnu(pattern, data, ["-c"] + (["-v"] if invert else []))
    assert [str(search.count)] == want


def test_fixed_strings_and_whole_words():
    data = b"a.b\naxb\nalphabet\nalpha beta\n"
    assert ours("a.b", data, Shape(), 3, fixed=True) == ["1:0:a.b"]
    assert ours("alpha", data, Shape(), 5, word=True) == ["4:17:alpha beta"]


def test_a_nul_in_the_first_bytes_is_binary_and_skipped_unless_asked():
    search = LineSearch(Pattern("alpha"), Shape(), lambda text: text)
    search.feed(b"alpha\0\n")
    assert search.binary and search.done and not search.hits
    search = LineSearch(Pattern("alpha"), Shape(binary=True), lambda text: text)
    search.feed(b"alpha\0\n")
    search.finish()
    assert search.count == 1


def test_the_redactor_sees_every_line_shown():
    search = LineSearch(Pattern("TOKEN"), Shape(before=1), lambda text: b"[redacted]")
    search.feed(b"HF_TOKEN=hf_secret\nline TOKEN\n")
    search.finish()
    assert [h.text for h in search.hits] == [b"[redacted]", b"[redacted]"]


def test_lines_held_past_the_limit_go_to_a_temp_file_and_come_back_in_order(monkeypatch):
    """Hits past HOLD_MAX bytes are pickled to an unnamed temp file (a member whose every line matches stays
    small), and batches() gives every line back once, in order, the held ones after the spilled ones."""
    from cloudvault.grep import lines

    monkeypatch.setattr(lines, "HOLD_MAX", 4096)
    data = b"".join(b"match %06d %s\n" % (i, b"x" * (i % 50)) for i in range(3000))
    search = LineSearch(Pattern("match"), Shape(), lambda text: text)
    for at in range(0, len(data), 7000):
        search.feed(data[at : at + 7000])
    search.finish()
    assert search._spill is not None  # it did go to disk
    batches = list(search.batches())
    assert len(batches) > 2 and max(sum(len(h.text) + 64 for h in b) for b in batches) <= 4096 + 200
    got = [h.text for b in batches for h in b]
    assert got == data.splitlines() and [h.line for b in batches for h in b] == list(range(1, 3001))
