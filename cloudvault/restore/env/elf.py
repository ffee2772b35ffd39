"""ELF RPATH/RUNPATH entries under an env's old prefix made relative ($ORIGIN/...), in place, so they survive any
later move. Reads the dynamic section through the program headers, as the loader does; no patchelf needed.
"""

from __future__ import annotations

import posixpath
import struct

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_STRTAB, DT_RPATH, DT_RUNPATH = 0, 5, 15, 29


def is_elf(head: bytes) -> bool:
    return head[:4] == b"\x7fELF"


def _layout(buf) -> tuple[str, int, int, int, int] | None:
    """(struct byte order, word format, phoff, phentsize, phnum) of an ELF32/64 file, or None if not one."""
    if len(buf) < 64 or not is_elf(bytes(buf[:4])) or buf[4] not in (1, 2) or buf[5] not in (1, 2):
        return None
    order = "<" if buf[5] == 1 else ">"
    if buf[4] == 2:
        (phoff,) = struct.unpack_from(order + "Q", buf, 32)
        phentsize, phnum = struct.unpack_from(order + "HH", buf, 54)
        return _inside(buf, (order, "Q", phoff, phentsize, phnum))
    (phoff,) = struct.unpack_from(order + "I", buf, 28)
    phentsize, phnum = struct.unpack_from(order + "HH", buf, 42)
    return _inside(buf, (order, "I", phoff, phentsize, phnum))


def _inside(buf, layout) -> tuple[str, int, int, int, int] | None:
    """layout, when its program headers lie within the file and are as long as one; else None (a damaged or
    hostile header: the file is then patched as any binary, its run paths not read)."""
    _order, word, phoff, phentsize, phnum = layout
    if phentsize < (56 if word == "Q" else 32) or phoff + phentsize * phnum > len(buf):
        return None
    return layout


def _segments(buf, layout) -> list[tuple[int, int, int, int]]:
    """(type, file offset, vaddr, file size) of each program header."""
    order, word, phoff, phentsize, phnum = layout
    out = []
    for i in range(phnum):
        at = phoff + i * phentsize
        if word == "Q":
            p_type, _flags, offset, vaddr, _paddr, filesz = struct.unpack_from(order + "IIQQQQ", buf, at)
        else:
            p_type, offset, vaddr, _paddr, filesz = struct.unpack_from(order + "IIIII", buf, at)
        out.append((p_type, offset, vaddr, filesz))
    return out


def run_paths(buf) -> list[tuple[int, bytes]]:
    """(file offset, value) of each DT_RPATH and DT_RUNPATH string; empty for a non-ELF or static file."""
    layout = _layout(buf)
    if layout is None:
        return []
    order, word = layout[0], layout[1]
    segments = _segments(buf, layout)
    entry = struct.calcsize(order + word * 2)
    strtab, wanted = None, []
    for p_type, offset, _vaddr, filesz in segments:
        if p_type != PT_DYNAMIC:
            continue
        for at in range(offset, min(offset + filesz, len(buf)) - entry + 1, entry):
            tag, value = struct.unpack_from(order + word * 2, buf, at)
            if tag == DT_NULL:
                break
            if tag == DT_STRTAB:
                strtab = value
            elif tag in (DT_RPATH, DT_RUNPATH):
                wanted.append(value)
    base = _file_offset(segments, strtab) if strtab is not None else None
    if base is None:
        return []
    out = []
    for index in wanted:
        start = base + index
        if start >= len(buf):  # a string table past the end of the file: nothing there to patch
            continue
        end = buf.find(b"\0", start)
        out.append((start, bytes(buf[start : end if end >= 0 else len(buf)])))
    return out


def _file_offset(segments, vaddr: int) -> int | None:
    for p_type, offset, seg_vaddr, filesz in segments:
        if p_type == PT_LOAD and seg_vaddr <= vaddr < seg_vaddr + filesz:
            return offset + vaddr - seg_vaddr
    return None


def relative_run_path(value: bytes, old: bytes, file_dir: str) -> bytes:
    """value's entries under old (the env's prefix) as $ORIGIN-relative paths from file_dir (relative to the env);
    other entries unchanged."""
    entries = []
    for item in value.split(b":"):
        if item == old or item.startswith(old + b"/"):
            inside = item[len(old) :].decode("utf-8", "surrogateescape").strip("/") or "."
            rel = posixpath.relpath(inside, file_dir or ".")
            item = b"$ORIGIN" if rel == "." else b"$ORIGIN/" + rel.encode("utf-8", "surrogateescape")
        entries.append(item)
    return b":".join(entries)


def patch_run_paths(buf, old: bytes, file_dir: str) -> int:
    """Rewrite in place every RPATH/RUNPATH that names old, where the relative form fits; the count rewritten."""
    done = 0
    for start, value in run_paths(buf):
        new = relative_run_path(value, old, file_dir)
        if new != value and len(new) <= len(value):
            buf[start : start + len(value)] = new + b"\0" * (len(value) - len(new))
            done += 1
    return done
