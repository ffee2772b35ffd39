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
        return order, "Q", phoff, phentsize, phnum
    (phoff,) = struct.unpack_from(order + "I", buf, 28)
    phentsize, phnum = struct.unpack_from(order + "HH", buf, 42)
    return order, "I", phoff, phentsize, phnum


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


FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian: a CUDA fat binary container
FATBIN_PTX, FATBIN_CUBIN = 1, 2


def _section(buf, name: bytes) -> tuple[int, int] | None:
    """(file offset, size) of the named section of a 64-bit little-endian ELF, or None."""
    if len(buf) < 64 or bytes(buf[:6]) != b"\x7fELF\x02\x01":
        return None
    (shoff,) = struct.unpack_from("<Q", buf, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", buf, 58)
    if not shoff or shstrndx >= shnum or shoff + shnum * shentsize > len(buf):
        return None
    (names_at,) = struct.unpack_from("<Q", buf, shoff + shstrndx * shentsize + 24)
    for i in range(shnum):
        (name_index,) = struct.unpack_from("<I", buf, shoff + i * shentsize)
        offset, size = struct.unpack_from("<QQ", buf, shoff + i * shentsize + 24)
        end = buf.find(b"\0", names_at + name_index)
        if bytes(buf[names_at + name_index : end]) == name:
            return offset, size
    return None


def cuda_arches(buf) -> dict[str, int]:
    """'sm_90' / 'compute_90' -> how many of the library's fat binaries carry it, read from its .nv_fatbin section
    (what `cuobjdump --list-elf/--list-ptx` lists, without needing the CUDA toolkit)."""
    where = _section(buf, b".nv_fatbin")
    if where is None:
        return {}
    counts: dict[str, int] = {}
    at, end = where[0], where[0] + where[1]
    while (at := buf.find(FATBIN_MAGIC, at, end)) >= 0:
        _magic, _version, header, size = struct.unpack_from("<IHHQ", buf, at)
        entry, stop = at + header, min(at + header + size, end)
        while entry + 32 <= stop:
            kind, _v, entry_header, padded = struct.unpack_from("<HHII", buf, entry)
            (sm,) = struct.unpack_from("<I", buf, entry + 28)
            if kind in (FATBIN_PTX, FATBIN_CUBIN) and 10 <= sm < 1000:
                name = f"{'sm' if kind == FATBIN_CUBIN else 'compute'}_{sm}"
                counts[name] = counts.get(name, 0) + 1
            if not entry_header:
                break
            entry += entry_header + padded
        at = max(stop, at + 4)
    return counts


def main_arches(counts: dict[str, int]) -> str | None:
    """The arch list most kernels carry ('sm_80 sm_90 sm_120'): targets in at least half as many fat binaries as
    the commonest, so a handful of special kernels (sm_121) do not make a GPU look supported."""
    if not counts:
        return None
    floor = max(counts.values()) / 2
    return " ".join(sorted((a for a, n in counts.items() if n >= floor), key=lambda a: (int(a.split("_")[1]), a)))
