"""Find lines inside every file and archive member, without extracting: `vault grep -i 'nan loss' 018`.

SCOPE is an entry (ID or unique prefix), ENTRY:GLOB (`018:*.log`), or nothing for the whole catalog. Every byte is
read through the verified reader (a member that does not match the catalog is reported, not searched), archives
in parallel; binary members are skipped unless --binary; secrets are shown redacted. Lines print as
ENTRY:PATH[::MEMBER]:LINE:text; --json gives {"matches": [...]}, one object per line; -q prints nothing and stops
at the first match. Exit 0 when a line is selected, 1 when none, 2 on an error (as grep).
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options

KINDS = ("file", "member")
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
COLOURS = {"path": "\033[35m", "line": "\033[32m", "match": "\033[1;31m", "sep": "\033[36m", "off": "\033[0m"}


def add_arguments(parser) -> None:
    parser.add_argument("pattern", metavar="PATTERN", help="a regular expression (ripgrep's syntax), or -F text")
    parser.add_argument("scopes", nargs="*", metavar="SCOPE", help="ENTRY or ENTRY:GLOB; none: the whole catalog")
    parser.add_argument("-i", "--ignore-case", action="store_true", help="case-insensitive")
    parser.add_argument("-F", "--fixed-strings", action="store_true", help="PATTERN is plain text")
    parser.add_argument("-w", "--word-regexp", action="store_true", help="match whole words only")
    parser.add_argument("-v", "--invert-match", action="store_true", help="select the lines that do not match")
    parser.add_argument("-l", "--files-with-matches", action="store_true", help="only the files/members that match")
    parser.add_argument("-c", "--count", action="store_true", help="how many lines match, per file/member")
    parser.add_argument("-m", "--max-count", type=int, default=0, metavar="N", help="at most N lines per file")
    parser.add_argument("-C", "--context", type=int, metavar="N", help="N lines before and after each match")
    parser.add_argument("-A", "--after-context", type=int, metavar="N", help="N lines after each match")
    parser.add_argument("-B", "--before-context", type=int, metavar="N", help="N lines before each match")
    parser.add_argument("-g", "--glob", action="append", default=[], metavar="GLOB",
                        help="only paths (file, member, archive) matching GLOB; !GLOB: not; repeatable")  # fmt: skip
    parser.add_argument("--kind", choices=KINDS, help="only plain files, or only archive members")
    parser.add_argument("--max-filesize", metavar="SIZE", help="skip files/members bigger than SIZE (10M, 1G)")
    parser.add_argument("--binary", action="store_true", help="search binary files too (a NUL in the first 8 KiB)")
    parser.add_argument("-n", "--line-number", action="store_true", help="(always on: lines are numbered)")
    parser.add_argument("-j", "--jobs", type=int, default=0, metavar="N", help="worker processes (default: cores)")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour the output")
    add_output_options(parser, quiet=True)


def run(args) -> int:
    import os
    import sys

    from cloudvault import config
    from cloudvault.cli.common import opened_catalog
    from cloudvault.cli.ui import UI
    from cloudvault.grep.run import Failure, grep

    options = _options(args)
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty() and not args.json)
    out = sys.stdout.buffer
    found = failed = wrote = False
    progress = UI(as_json=args.json, quiet=args.quiet).progress("searching")
    if args.json:
        out.write(b'{"matches": [')  # one document, written as the matches come
    with opened_catalog(args, readonly=True) as conn:
        catalog = os.path.abspath(config.catalog_path(args.catalog))
        for result in grep(conn, catalog, options, args.scopes, progress=progress):
            if isinstance(result, Failure):
                failed = True
                sys.stderr.write(f"vault: {result.label}: {result.message}\n")
                continue
            if args.quiet:
                found = True
                break
            found = True
            if args.json:
                chunk = _json(result, args, first=not wrote)
                wrote = wrote or bool(chunk)
            else:
                chunk = _text(result, args, options, colour)
            out.write(chunk)
            out.flush()
    if args.json:
        out.write(b"\n]}\n" if wrote else b"]}\n")
    if found and args.quiet:
        return errors.OK
    return 2 if failed else errors.OK if found else errors.NOTHING_FOUND


def _options(args):
    from cloudvault.grep.lines import Shape
    from cloudvault.grep.run import GrepOptions

    for name in ("max_count", "context", "after_context", "before_context", "jobs"):
        if (getattr(args, name) or 0) < 0:
            raise errors.UsageError(detail=f"--{name.replace('_', '-')} must be 0 or more")
    before = args.before_context if args.before_context is not None else args.context or 0
    after = args.after_context if args.after_context is not None else args.context or 0
    counting = args.count or args.files_with_matches or args.quiet
    shape = Shape(invert=args.invert_match, max_count=args.max_count, before=0 if counting else before,
                  after=0 if counting else after, keep_lines=not counting,
                  first_only=args.files_with_matches or args.quiet, binary=args.binary)  # fmt: skip
    return GrepOptions(args.pattern, args.fixed_strings, args.ignore_case, args.word_regexp, shape,
                       tuple(args.glob), args.kind, _size(args.max_filesize), args.jobs or os_cores())  # fmt: skip


def os_cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _size(text: str | None) -> int | None:
    if text is None:
        return None
    number, unit = text.strip().upper().rstrip("B"), ""
    if number and number[-1] in UNITS:
        number, unit = number[:-1], number[-1]
    if not number.isdigit():
        raise errors.UsageError(detail=f"--max-filesize {text!r}: give a size such as 500K, 10M or 2G")
    return int(number) * UNITS[unit]


def _text(result, args, options, colour: bool) -> bytes:
    label = result.label.encode("utf-8", "surrogateescape")
    if colour:
        label = COLOURS["path"].encode() + label + COLOURS["off"].encode()
    if args.files_with_matches:
        return label + b"\n"
    if args.count:
        return label + b":%d\n" % result.count
    pattern = _pattern(options) if colour else None
    out = []
    for hit in result.hits:
        if hit.kind == "--":
            out.append((COLOURS["sep"] + "--" + COLOURS["off"] + "\n").encode() if colour else b"--\n")
            continue
        number = str(hit.line).encode()
        text = hit.text
        if colour:
            number = COLOURS["line"].encode() + number + COLOURS["off"].encode()
            if hit.kind == ":" and not args.invert_match:
                text = _painted(text, pattern)
        sep = hit.kind.encode()
        out.append(label + sep + number + sep + text + b"\n")
    return b"".join(out)


_compiled: list = []


def _pattern(options):
    if not _compiled:
        from cloudvault.grep.pattern import Pattern

        _compiled.append(Pattern(options.pattern, fixed=options.fixed, ignore_case=options.ignore_case,
                                 word=options.word))  # fmt: skip
    return _compiled[0]


def _painted(text: bytes, pattern) -> bytes:
    spans = pattern.spans(text)
    if not spans:
        return text
    out, at = [], 0
    on, off = COLOURS["match"].encode(), COLOURS["off"].encode()
    for start, end in spans:
        out += [text[at:start], on, text[start:end], off]
        at = end
    return b"".join([*out, text[at:]])


def _json(result, args, first: bool) -> bytes:
    """The result's objects of the one --json document, each on its own line, after a comma unless first."""
    import json

    base = {"entry": result.entry, "path": result.path, "archive": result.archive, "member": result.member}
    if args.files_with_matches or args.count:
        docs = [{"type": "count", **base, "count": result.count}]
    else:
        docs = [
            {"type": "match" if hit.kind == ":" else "context", **base, "line": hit.line, "offset": hit.offset,
             "text": hit.text.decode("utf-8", "replace")}
            for hit in result.hits if hit.kind != "--"
        ]  # fmt: skip
    if not docs:
        return b""
    text = ",\n".join(json.dumps(doc, ensure_ascii=False) for doc in docs)
    return (b"\n" if first else b",\n") + text.encode()
