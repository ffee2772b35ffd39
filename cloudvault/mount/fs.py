"""The FUSE operations of `vault mount` (mfusepy's high-level API): a read-only tree whose reads are verified.

- Lookups, listings and stat come from the Tree (the catalog); only open and read touch the mirror.
- Every read returns only bytes of pieces that matched the catalog's piece hashes (`io.members.VerifiedRanges`:
  the pieces covering the range are read whole and checked first, and kept verified in a cache; a small read in
  a member's first MiB, its 64 KiB parts: the first byte waits for 64 KiB, not 1 MiB). A piece that
  does not match is EIO for any read touching it, with one log line naming the file and the piece's offset; so
  is a damaged frame or a stale archive. The pieces before and after it still read. A piece in cached frames is
  checked where it was decoded and copied once, from there into libfuse's buffer (fuse_binding's read).
- A listing answers READDIRPLUS with its entries' attributes, so the kernel opens a listed folder's files with no
  lookup each; each libfuse thread keeps its Python thread state from one callback to the next.
- Anything that would change the tree is EROFS. A member flagged as a secret lists (its flag in the xattr
  `user.cloudvault.flag`) but opening it is EACCES unless the mount allows flagged members.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import signal
import stat
import sys
import threading
import time
from pathlib import Path

from cloudvault.errors import VaultError
from cloudvault.mount.frames import Sources, bytes_address
from cloudvault.mount.session import MountFailed, import_mfusepy, mounted
from cloudvault.mount.tree import Node, Tree

log = logging.getLogger("cloudvault.mount")
XATTR_FLAG = "user.cloudvault.flag"
XATTR_BLAKE3 = "user.cloudvault.blake3"
XATTR_SOURCE = "user.cloudvault.source"
MAX_THREADS = 16
KERNEL_CACHE_S = 3600  # the tree and its bytes never change while mounted: the kernel may keep what it was told
KEPT_LISTINGS = 16  # folders whose listing (names and attributes) is kept for the kernel's next part of it
LOOP_ENDED_BY_SIGNAL = 8  # fuse_main's return when its loop was ended (by a signal the handlers caught)


class Handle:
    """One open file: its path, its node and its verified reads."""

    def __init__(self, path: str, node: Node, read) -> None:
        self.path, self.node, self.read = path, node, read


class VaultFS:
    """The operations; wrapped by make_operations into an mfusepy.Operations subclass."""

    def __init__(self, tree: Tree, sources: Sources, allow_flagged: bool = False) -> None:
        self.tree = tree
        self.sources = sources
        self.allow_flagged = allow_flagged
        self.handles: dict[int, Handle] = {}
        self._listings: dict[str, list] = {}  # the last KEPT_LISTINGS folders listed, oldest first
        self._next = 1
        self._lock = threading.Lock()
        self.uid, self.gid = os.getuid(), os.getgid()
        self.started = time.time_ns()

    # -- lookups ------------------------------------------------------------------------------------------------
    def _node(self, path: str) -> Node:
        node = self.tree.lookup(path)
        if node is None:
            raise self.error(errno.ENOENT)
        return node

    def getattr(self, path: str, fh=None) -> dict:
        return self.attributes(self._node(path))

    def attributes(self, node: Node) -> dict:
        mtime = node.mtime_ns or self.started
        return {"st_mode": node.mode, "st_size": node.size, "st_nlink": 2 if node.is_dir else 1,
                "st_uid": self.uid, "st_gid": self.gid, "st_mtime": mtime / 1e9, "st_ctime": mtime / 1e9,
                "st_atime": mtime / 1e9, "st_blocks": (node.size + 511) // 512, "st_blksize": 1 << 17}  # fmt: skip

    def readdir(self, path: str, fh) -> list:
        node = self._node(path)
        if not node.is_dir:
            raise self.error(errno.ENOTDIR)
        return [".", "..", *self.tree.names(path)]

    def listing(self, path: str) -> list[tuple[str, dict | None]]:
        """The folder's names, each with its attributes where they are at hand (its node kept by the listing),
        for READDIRPLUS: the kernel then has each entry and never looks it up. The last few listings are kept: the
        kernel asks for a long one in parts, and the tree never changes while mounted."""
        with self._lock:
            found = self._listings.get(path)
        if found is not None:
            return found
        names = self.readdir(path, None)
        prefix = path.rstrip("/")
        found = [(name, None) for name in names[:2]]
        for name in names[2:]:
            node = self.tree.kept(f"{prefix}/{name}")
            found.append((name, None if node is None else self.attributes(node)))
        with self._lock:
            self._listings[path] = found
            while len(self._listings) > KEPT_LISTINGS:
                self._listings.pop(next(iter(self._listings)))
        return found

    def readlink(self, path: str) -> str:
        node = self._node(path)
        if not stat.S_ISLNK(node.mode):
            raise self.error(errno.EINVAL)
        return node.link_target or ""

    def listxattr(self, path: str) -> list[str]:
        node = self._node(path)
        names = [XATTR_SOURCE] if node.data is not None else []
        if node.data is not None and node.data.blake3:
            names.append(XATTR_BLAKE3)
        if node.flag:
            names.append(XATTR_FLAG)
        return names

    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        node = self._node(path)
        data = node.data
        values = {XATTR_FLAG: node.flag, XATTR_BLAKE3: data.blake3 if data else None,
                  XATTR_SOURCE: (data.label if data.archive else data.path) if data else None}  # fmt: skip
        value = values.get(name)
        if value is None:
            raise self.error(errno.ENODATA)
        return value.encode()

    def statfs(self, path: str) -> dict:
        return {"f_bsize": 1 << 17, "f_frsize": 1 << 17, "f_blocks": 0, "f_bfree": 0, "f_bavail": 0,
                "f_files": len(self.tree.nodes), "f_ffree": 0, "f_namemax": 255}  # fmt: skip

    # -- reads --------------------------------------------------------------------------------------------------
    def open(self, path: str, flags: int) -> int:
        node = self._node(path)
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
            raise self.error(errno.EROFS)
        if node.data is None:
            raise self.error(errno.EISDIR if node.is_dir else errno.EACCES)
        if node.flag and not self.allow_flagged:
            log.warning("vault mount: %s is flagged (%s): not readable without --allow-flagged", path, node.flag)
            raise self.error(errno.EACCES)
        try:
            self.sources.check(node.data)
            read = self.sources.reader(node.data)
        except VaultError as exc:
            log.error("vault mount: EIO %s: %s", path, exc.message)
            raise self.error(errno.EIO) from None
        with self._lock:
            fh = self._next
            self._next += 1
            self.handles[fh] = Handle(path, node, read)
        return fh

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        buffer = ctypes.create_string_buffer(max(0, size))
        return buffer.raw[: self.read_into(path, ctypes.addressof(buffer), size, offset, fh)]

    def read_into(self, path: str | None, address: int, size: int, offset: int, fh: int) -> int:
        """Bytes [offset, offset + size) of the open file fh written at address (libfuse's buffer), copied once
        from where their piece verified; how many (fewer at the file's end)."""
        handle = self.handles.get(fh)
        if handle is None:
            raise self.error(errno.EBADF)
        size = max(0, min(size, handle.node.size - offset))
        if not size:
            return 0
        try:
            parts = handle.read.parts(offset, size) if hasattr(handle.read, "parts") else None
            if parts is None:
                data = handle.read(offset, size)
                parts = [(data, bytes_address(data), len(data))]
            done = 0
            for _, at, n in parts:  # the holders keep each part's memory where it is until the copy is done
                ctypes.memmove(address + done, at, min(n, size - done))
                done += n
            if done != size:
                raise OSError(f"{done} bytes where the catalog has {size}")
        except VaultError as exc:
            log.error("vault mount: EIO %s: %s", path or handle.path, exc.message)
            raise self.error(errno.EIO) from None
        except OSError as exc:
            if isinstance(exc, import_mfusepy().FuseOSError):
                raise
            log.error("vault mount: EIO %s: %s", path or handle.path, exc)
            raise self.error(errno.EIO) from None
        return size

    def release(self, path: str, fh: int) -> int:
        handle = self.handles.pop(fh, None)
        if handle is not None:
            handle.read.close()
        return 0

    # -- everything that writes ---------------------------------------------------------------------------------
    def read_only(self, *args, **kwargs):
        raise self.error(errno.EROFS)

    def error(self, code: int) -> OSError:
        return _fuse_error(code)


READDIR_PLUS = 1  # libfuse's fuse_readdir_flags: the kernel asked for READDIRPLUS
FILL_DIR_PLUS = 2  # fuse_fill_dir_flags: this entry's attributes are whole (the kernel keeps them)
CAP_READDIRPLUS_AUTO = 1 << 14  # fuse_common.h: READDIRPLUS only for a listing's first part, or after lookups

WRITES = ("chmod", "chown", "create", "mkdir", "mknod", "rename", "rmdir", "symlink", "link", "truncate",
          "unlink", "utimens", "write", "setxattr", "removexattr")  # fmt: skip
READS = ("getattr", "readdir", "readlink", "listxattr", "getxattr", "statfs", "open", "read", "release")
MORE = ("read_into", "listing")  # what fuse_binding's FUSE calls besides mfusepy's operations


def _fuse_error(code: int) -> OSError:
    mfusepy = import_mfusepy()
    return mfusepy.FuseOSError(code)


def make_operations(vfs: VaultFS):
    """An mfusepy.Operations whose reads are vfs's and whose writes are EROFS."""
    mfusepy = import_mfusepy()
    methods = {name: _bound(getattr(vfs, name)) for name in (*READS, *MORE)}
    methods.update({name: _bound(vfs.read_only) for name in WRITES})
    return type("VaultOperations", (mfusepy.Operations,), methods)()


def fuse_binding(mfusepy):
    """mfusepy's FUSE, but a read is written into libfuse's buffer by the operations' read_into (one copy, from
    where the bytes verified) rather than returned as bytes for mfusepy to copy."""

    class VaultFUSE(mfusepy.FUSE):
        def _wrapper(self, func, *args, **kwargs):
            if not getattr(_thread_state, "kept", False):
                keep_thread_state()
            return super()._wrapper(func, *args, **kwargs)

        def read(self, path, buf, size, offset, fip) -> int:
            address = ctypes.cast(buf, ctypes.c_void_p).value
            return self.operations.read_into(None, address, size, offset, fip.contents.fh)

        def init_fuse_3(self, conn, config) -> None:
            super().init_fuse_3(conn, config)
            if conn:  # READDIRPLUS on every listing, not only its first part: a folder's later entries too
                conn.contents.want &= ~CAP_READDIRPLUS_AUTO

        def readdir_fuse_3(self, path, buf, filler, offset, fip, flags) -> int:
            """READDIRPLUS in libfuse's offset mode (entry i's offset i + 1: only then does libfuse pass the
            attributes on), from offset, as many as the kernel's buffer takes."""
            if not flags & READDIR_PLUS:
                return super().readdir_fuse_3(path, buf, filler, offset, fip, flags)
            st = mfusepy.c_stat()
            entries = self.operations.listing(path.decode(self.encoding, self.errors))
            for at in range(offset, len(entries)):
                name, attrs = entries[at]
                ctypes.memset(ctypes.byref(st), 0, ctypes.sizeof(st))
                mfusepy.set_st_attrs(st, attrs or {"st_mode": stat.S_IFDIR}, use_ns=self.use_ns)
                if filler(buf, name.encode(self.encoding, self.errors), st, at + 1, FILL_DIR_PLUS if attrs else 0):
                    break
            return 0

    return VaultFUSE


_thread_state = threading.local()


def keep_thread_state() -> None:
    """Keep this libfuse thread's Python thread state for its next callbacks. Python makes one for each callback
    on a thread it did not start and drops it after, with its 16 KiB frame stack mapped and unmapped each time
    (an unmap in a threaded process interrupts every other CPU to flush its TLB): three per file `grep -r` reads.
    One more PyGILState_Ensure, never released, keeps it (libfuse keeps its threads: at most max_threads)."""
    ctypes.pythonapi.PyGILState_Ensure()
    _thread_state.kept = True


def _bound(fn):
    def method(self, *args, **kwargs):
        return fn(*args, **kwargs)

    method.__name__ = fn.__name__
    return method


def serve(tree, sources, mountpoint: Path, *, allow_flagged: bool = False, debug: bool = False) -> None:
    """Serve the tree at mountpoint until it is unmounted, or a stopping signal (SIGINT, SIGTERM, SIGHUP) ends
    the loop: libfuse then unmounts, and serve returns."""
    mfusepy = import_mfusepy()
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("fuse").setLevel(logging.DEBUG if debug else logging.CRITICAL)  # mfusepy's own errno chatter
    ops = make_operations(VaultFS(tree, sources, allow_flagged=allow_flagged))
    try:
        caches = {"kernel_cache": True, "attr_timeout": KERNEL_CACHE_S, "entry_timeout": KERNEL_CACHE_S,
                  "negative_timeout": KERNEL_CACHE_S}  # fmt: skip
        with stopping_signals_to_libfuse():
            fuse_binding(mfusepy)(ops, str(mountpoint), foreground=True, ro=True, nothreads=False, fsname="cloudvault",
                         subtype="vault", debug=debug, max_threads=MAX_THREADS, **caches)  # fmt: skip
    except RuntimeError as exc:
        if str(exc) == str(LOOP_ENDED_BY_SIGNAL) and not mounted(mountpoint):
            return  # a stopping signal: libfuse unmounted and reports the signal as its loop's end
        raise MountFailed(path=mountpoint, detail=f"libfuse said {exc}") from None


@contextlib.contextmanager
def stopping_signals_to_libfuse():
    """SIGTERM and SIGHUP left to libfuse while it serves, as mfusepy leaves SIGINT: libfuse installs its own
    handlers (which end its loop and unmount) only over the default action. vault's Python handlers would never
    run: libfuse holds the main thread, and Python runs a handler only there, between bytecodes."""
    previous = {sig: signal.signal(sig, signal.SIG_DFL) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
