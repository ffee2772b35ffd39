"""Moving an installed env's bytes from one prefix to another: text replacement, conda's long-shebang trampoline,
NUL-padded binary patches. Pure functions over bytes (and in-place buffers), so tests need no disk.
"""

from __future__ import annotations

import re

SHEBANG_MAX = 127  # the kernel reads at most this much of a #! line (BINPRM_BUF_SIZE - 1 on older kernels)
# A prefix ends where a path component ends: /envs/a must not match inside /envs/ab.
_NOT_PATH_CHAR = rb"(?![A-Za-z0-9_.\-])"


def prefix_pattern(old: bytes) -> re.Pattern[bytes]:
    return re.compile(re.escape(old) + _NOT_PATH_CHAR)


class PrefixScanner:
    """Watches a stream go by and says whether it held the prefix and a NUL byte (conda's text/binary test)."""

    def __init__(self, old: bytes) -> None:
        self.old = old
        self._tail = b""
        self.found = False
        self.has_nul = False

    def feed(self, chunk: bytes) -> None:
        if not self.has_nul and b"\0" in chunk:
            self.has_nul = True
        if not self.found:
            window = self._tail + chunk
            self.found = self.old in window
            self._tail = window[-(len(self.old) - 1) :] if len(self.old) > 1 else b""


def rewrite_text(data: bytes, old: bytes, new: bytes) -> bytes:
    """Every old prefix replaced by new; a #! line that grew too long (or holds a space) becomes a trampoline."""
    out = prefix_pattern(old).sub(lambda _m: new, data)
    return fix_shebang(out, new) if out.startswith(b"#!") else out


def fix_shebang(data: bytes, new: bytes) -> bytes:
    """A python #! line the kernel cannot run (over 127 bytes, or a space in the interpreter's path) as conda and
    pip write it: `#!/bin/sh` then a line that sh runs as exec and Python reads as a string. Others unchanged."""
    line, newline, rest = data.partition(b"\n")
    command = line[2:].strip()
    if not command.startswith(new):
        return data
    interpreter, _, args = command[len(new) :].partition(b" ")
    interpreter = new + interpreter
    if len(line) <= SHEBANG_MAX and b" " not in new:
        return data
    if not interpreter.rsplit(b"/", 1)[-1].startswith(b"python"):
        return data  # only Python reads the trampoline as a no-op; listed as unpatched by the caller
    extra = b" " + args.strip() if args.strip() else b""
    return b"#!/bin/sh\n'''exec' \"" + interpreter + b'"' + extra + b' "$0" "$@"\n' + b"' '''\n" + rest


def shebang_runs(data: bytes, new: bytes = b"") -> bool:
    """Whether the kernel can run this #! line as written: at most 127 bytes, and no space inside an interpreter
    path under the new prefix."""
    if not data.startswith(b"#!"):
        return True
    line = data.split(b"\n", 1)[0]
    return len(line) <= SHEBANG_MAX and not (b" " in new and line[2:].lstrip().startswith(new))


def patch_binary(buf, old: bytes, new: bytes, room: int | None = None) -> tuple[int, list[int]]:
    """Rewrite, in place, each NUL-terminated string holding old so it holds new, padded with NULs to its length.

    buf is a bytearray or a writable mmap (a big library is never read into memory). The string may grow into
    the NULs after it up to room bytes of prefix (conda pads an installed binary to its build placeholder's
    length; room is that length), never past the next non-NUL byte, always keeping one NUL to end it. Returns
    the number of strings patched and the offsets of those the new prefix did not fit."""
    pattern = prefix_pattern(old)
    size = len(buf)
    patched, misfits, done_to = 0, [], 0
    for start in [m.start() for m in pattern.finditer(buf)]:
        if start < done_to:
            continue  # a second prefix inside a string already patched
        end = buf.find(b"\0", start)
        end = size if end < 0 else end
        done_to = end
        limit = min(size, end + 1 + max(0, (room or 0) - len(old)))
        stop = end
        while stop < limit and buf[stop] == 0:
            stop += 1
        text = pattern.sub(lambda _m: new, bytes(buf[start:end]))
        if len(text) > stop - start - (1 if end < size else 0):
            misfits.append(start)
            continue
        buf[start:stop] = text + b"\0" * (stop - start - len(text))
        patched += 1
    return patched, misfits
