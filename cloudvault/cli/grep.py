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
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import grep as view
    from cloudvault.grep.run import GrepRequest, grep_catalog

    request = GrepRequest(args.catalog, _options(args), tuple(args.scopes), first_settles=args.quiet)
    ui = UI(as_json=args.json, quiet=args.quiet)
    counted = args.count or args.files_with_matches
    if args.json:  # one document, written as the matches come
        shown = view.JsonLines(counted)
    else:
        shown = view.Lines(request.options, files_only=args.files_with_matches, count=args.count, color=args.color)
    outcome = grep_catalog(request, shown.found, view.failed, progress=ui.progress("searching"))
    shown.end()
    if outcome.found and args.quiet:
        return errors.OK
    return 2 if outcome.failed else errors.OK if outcome.found else errors.NOTHING_FOUND


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
