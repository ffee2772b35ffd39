"""The tar corpus: archives other tools made (CPython, libarchive, ratarmount; see SOURCES.md) and archives GNU tar
and bsdtar write here in every format, each compressed three ways; and GNU tar's own reading of each, the truth
the tests hold vault to (its listing, what it extracts, whether it rejects the archive)."""

from __future__ import annotations

import binascii
import os
import re
import subprocess
from pathlib import Path

import blake3
import zstandard

CORPUS = Path(__file__).parent
SHAPES = ("zstd", "pzstd", "frames")  # one zstd frame; pzstd's frames; small independent frames (python)
# the other formats vault opens (issue 36), each written by its own tool: the shape -> (the command that compresses
# stdin to stdout, or None for none; the file name's ending)
OTHER_SHAPES = {
    "plain": (None, ".tar"),
    "gzip": (["gzip", "-c"], ".tar.gz"),
    "pigz": (["pigz", "-c", "-b", "32", "-p", "2"], ".tgz"),  # blocks deflated in parallel, joined in one member
    "bgzip": (["bgzip", "-c"], ".tar.gz"),  # 64 KiB gzip members one after another
    "bzip2": (["bzip2", "-c", "-1"], ".tar.bz2"),
    "xz": (["xz", "-c", "-T1"], ".tar.xz"),  # one block
    "xz-blocks": (["xz", "-c", "--block-size=32KiB"], ".txz"),  # many blocks: entered by xz's own index
    "tzst": (["zstd", "-q", "-c"], ".tzst"),
}
ALL_SHAPES = SHAPES + tuple(OTHER_SHAPES)


def suffix(shape: str) -> str:
    """The file name's ending for an archive of this shape."""
    return OTHER_SHAPES[shape][1] if shape in OTHER_SHAPES else ".tar.zst"


FRAME = 16 << 10


# -- committed files ---------------------------------------------------------------------------------------------
def uudecode(text: bytes) -> bytes:
    """The body of a uuencoded file (`begin MODE NAME` ... `end`), as libarchive's test files are stored."""
    out = bytearray()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(b"begin "))
    for line in lines[start + 1 :]:
        if line.strip() == b"end":
            break
        if line:
            try:
                out += binascii.a2b_uu(line)
            except binascii.Error:  # some encoders pad lines with extra characters: decode only what the count says
                count = (line[0] - 32) & 63
                out += binascii.a2b_uu(line[: 1 + (count + 2) // 3 * 4])
    return bytes(out)


def _decompressed(data: bytes, name: str) -> bytes:
    """A committed file's tar bytes: .uu decoded, then .Z / .bz2 / .zst layers removed (with the real tools)."""
    if name.endswith(".uu"):
        return _decompressed(uudecode(data), name[:-3])
    tools = {".Z": ["gzip", "-dc"], ".bz2": ["bzip2", "-dc"], ".zst": ["zstd", "-dcq"]}
    for suffix, tool in tools.items():
        if name.endswith(suffix):
            raw = subprocess.run(tool, input=data, capture_output=True, check=True).stdout
            return _decompressed(raw, name[: -len(suffix)])
    return data


SUFFIXES = re.compile(r"(\.tar)?(\.(uu|Z|bz2|zst))*$")


def committed(out: Path) -> dict[str, Path]:
    """name -> plain tar file for every archive under tests/corpus/ (written into out)."""
    found = {}
    for source in ("cpython", "libarchive", "ratarmount"):
        for path in sorted((CORPUS / source).iterdir()):
            name = f"{source}-{SUFFIXES.sub('', path.name)}"
            target = out / f"{name}.tar"
            target.write_bytes(_decompressed(path.read_bytes(), path.name))
            found[name] = target
    return found


def compressed_as_shipped(out: Path) -> dict[str, Path]:
    """file name -> archive for every file under tests/corpus/compressed/ (uudecoded if need be), kept in the
    compression (gzip, bzip2, xz, zstd) its project shipped it in."""
    found = {}
    for path in sorted((CORPUS / "compressed").iterdir()):
        name = path.name.removesuffix(".uu")
        data = path.read_bytes()
        (out / name).write_bytes(uudecode(data) if path.name.endswith(".uu") else data)
        found[name] = out / name
    return found


# -- archives made here ------------------------------------------------------------------------------------------
def _sparse_file(path: Path, pieces: int, gap: int = 64 << 10, piece: int = 3000) -> None:
    """A file with real holes: pieces of data spaced gap apart, ending in a hole."""
    with open(path, "wb") as fh:
        for i in range(pieces):
            fh.seek(i * gap)
            fh.write(bytes([65 + i % 26]) * piece)
        fh.truncate(pieces * gap + gap)


def _tree(root: Path, *, long_names: bool, non_utf8: bool, sparse: bool) -> None:
    (root / "docs").mkdir(parents=True)
    (root / "docs/readme.txt").write_text("hello corpus\n")
    (root / "empty").write_bytes(b"")
    (root / "docs/sub").mkdir()
    (root / "docs/sub/data.bin").write_bytes(bytes(range(256)) * 40)
    os.symlink("docs/readme.txt", root / "link")
    os.link(root / "docs/readme.txt", root / "hard")
    if long_names:
        deep = root / ("d" * 80) / ("e" * 80)
        deep.mkdir(parents=True)
        (deep / ("f" * 120)).write_text("long\n")
        os.symlink("../" + "x" * 150, root / "long_target_link")
    if non_utf8:
        base = os.fsencode(root)
        with open(os.path.join(base, b"caf\xe9.txt"), "wb") as fh:
            fh.write(b"latin-1 name\n")
        os.symlink(b"target_\xff\xfe", os.path.join(base, b"bad_target_link"))
    if sparse:
        _sparse_file(root / "sparse_few.img", 3)
        _sparse_file(root / "sparse_many.img", 30)  # old-GNU: more than 4 pieces need extension blocks
        _sparse_file(root / "sparse_big.img", 40, gap=256 << 10)


GNU_FORMATS = {
    "gnu": ["--format=gnu", "--sparse"],
    "oldgnu": ["--format=oldgnu", "--sparse"],
    "pax": ["--format=pax", "--sparse"],
    "pax-sparse-0.0": ["--format=pax", "--sparse", "--sparse-version=0.0"],
    "pax-sparse-0.1": ["--format=pax", "--sparse", "--sparse-version=0.1"],
    "pax-sparse-1.0": ["--format=pax", "--sparse", "--sparse-version=1.0"],
    "ustar": ["--format=ustar"],
    "v7": ["--format=v7"],
}


BSD_FORMATS = ("pax", "ustar", "gnutar", "v7")


def generated(work: Path) -> dict[str, Path]:
    """Archives GNU tar writes in every format (sparse files, long names and link targets, hardlinks, non-UTF-8
    names and targets where the format holds them, a `tar -r` update of a hardlinked file) and bsdtar writes."""
    found = {}
    for fmt, options in GNU_FORMATS.items():
        small = fmt in ("ustar", "v7")
        src = work / f"src-{fmt}"
        _tree(src, long_names=not small, non_utf8=fmt != "ustar", sparse="--sparse" in options)
        out = work / f"gnutar-{fmt}.tar"
        base = ["tar", *options, "--numeric-owner", "-C", str(src)]
        subprocess.run([*base, "-cf", str(out), "."], check=True, capture_output=True)
        (src / "docs/readme.txt").write_text("second version, appended with tar -r\n")  # the hardlink keeps v1
        subprocess.run([*base, "-rf", str(out), "./docs/readme.txt"], check=True, capture_output=True)
        found[f"gnutar-{fmt}"] = out
    for fmt in BSD_FORMATS:
        src = work / f"src-bsd-{fmt}"
        _tree(src, long_names=fmt in ("pax", "gnutar"), non_utf8=fmt != "ustar", sparse=fmt == "pax")
        out = work / f"bsdtar-{fmt}.tar"
        subprocess.run(["bsdtar", f"--format={fmt}", "-C", str(src), "-cf", str(out), "."], check=True,
                       capture_output=True)  # fmt: skip
        found[f"bsdtar-{fmt}"] = out
    return found


# -- shapes ------------------------------------------------------------------------------------------------------
def compress(tar: Path, out: Path, shape: str) -> Path:
    data = tar.read_bytes()
    if shape == "frames":
        cctx = zstandard.ZstdCompressor(write_checksum=True)
        out.write_bytes(b"".join(cctx.compress(data[i : i + FRAME]) for i in range(0, len(data), FRAME)))
        return out
    if shape in OTHER_SHAPES:
        tool = OTHER_SHAPES[shape][0]
        if tool is None:
            out.write_bytes(data)
            return out
    else:
        tool = ["zstd", "-q", "-c"] if shape == "zstd" else ["pzstd", "-q", "-p", "2", "-c"]
    with open(out, "wb") as fh:
        subprocess.run(tool, input=data, stdout=fh, check=True)
    return out


# -- GNU tar's reading -------------------------------------------------------------------------------------------
LINE = re.compile(rb'^(\S)\S{9} +\S+ +(\S+) +\S+ +\S+ +"((?:[^"\\]|\\.)*)"(.*)$')
C_ESCAPES = {b"n": 10, b"t": 9, b"r": 13, b"a": 7, b"b": 8, b"f": 12, b"v": 11, b"\\": 92, b'"': 34, b"?": 63}


def c_unquote(text: bytes) -> bytes:
    """A name as `--quoting-style=c` prints it, back to its bytes."""
    out, i = bytearray(), 0
    while i < len(text):
        if text[i] != 0x5C:
            out.append(text[i])
            i += 1
        elif text[i + 1 : i + 2].isdigit():
            out.append(int(text[i + 1 : i + 4], 8))
            i += 4
        else:
            out.append(C_ESCAPES[text[i + 1 : i + 2]])
            i += 2
    return bytes(out)


def gnu_listing(tar: Path) -> tuple[int, list[tuple[str, bytes, int | None, bytes | None]]]:
    """GNU tar's exit status listing the archive, and each member as (type letter, name, size of a regular file,
    link target)."""
    proc = subprocess.run(["tar", "--quoting-style=c", "--numeric-owner", "--full-time", "-tvf", str(tar)],
                          capture_output=True)  # fmt: skip
    members = []
    for line in proc.stdout.splitlines():
        m = LINE.match(line)
        assert m, line
        kind, size, name, rest = m.group(1).decode(), m.group(2), c_unquote(m.group(3)), m.group(4)
        link = None
        target = re.match(rb'^ (?:->|link to) "((?:[^"\\]|\\.)*)"$', rest)
        if target:
            link = c_unquote(target.group(1))
        members.append((kind, name, int(size) if kind in "-C" else None, link))
    return proc.returncode, members


def gnu_extract(tar: Path, dest: Path) -> tuple[int, dict[bytes, str]]:
    """GNU tar's exit status extracting the archive into dest, and the BLAKE3 of each regular file it wrote."""
    dest.mkdir(parents=True)
    proc = subprocess.run(["tar", "--no-same-owner", "--no-same-permissions", "-C", str(dest), "-xf", str(tar)],
                          capture_output=True)  # fmt: skip
    hashes = {}
    base = os.fsencode(dest)
    for folder, _dirs, files in os.walk(base):
        for name in files:
            full = os.path.join(folder, name)
            if os.path.isfile(full) and not os.path.islink(full):
                h = blake3.blake3()
                with open(full, "rb") as fh:
                    while chunk := fh.read(1 << 20):
                        h.update(chunk)
                hashes[os.path.relpath(full, base)] = h.hexdigest()
    return proc.returncode, hashes


def names() -> list[str]:
    """Every corpus archive's name, known without building anything (for test parameters)."""
    found = [f"{source}-{SUFFIXES.sub('', path.name)}" for source in ("cpython", "libarchive", "ratarmount")
             for path in sorted((CORPUS / source).iterdir())]  # fmt: skip
    return found + [f"gnutar-{fmt}" for fmt in GNU_FORMATS] + [f"bsdtar-{fmt}" for fmt in BSD_FORMATS]


def safer_name(name: bytes) -> bytes:
    """A member name as GNU tar shows and extracts it, and as vault's catalog keeps it: leading './' and trailing
    '/' dropped; then, as GNU tar's safer_name_suffix, leading '/' and everything up to a last '..' removed."""
    parts = name.split(b"/")
    if b".." in parts:
        parts = parts[len(parts) - parts[::-1].index(b"..") :]
    name = b"/".join(parts).lstrip(b"/")
    while name.startswith(b"./"):
        name = name[2:].lstrip(b"/")
    return name.rstrip(b"/") or b"."
