"""BLAKE3 helpers: streaming over chunks, multi-threaded over big files, with piece hashes (see pieces.py)."""

from __future__ import annotations

import contextlib
import os

import blake3

from cloudvault.jobthreads import JobThreads
from cloudvault.pieces import (
    ONE_PASS,
    PIECE,
    PieceHasher,
    first_piece_values,
    one_pass_result,
    piece_digest,
    piece_value,
)

try:
    from cloudvault import _plainruns
except ImportError:  # not built (no C compiler where it was installed): each small member hashed alone
    _plainruns = None

CHUNK = 1 << 20
MMAP_THRESHOLD = 16 << 20


def member_hex_digests(buffer, starts: list[int], sizes: list[int], shift: int, limit: int) -> list[str | None]:
    """The BLAKE3 (hex) of each member buffer[starts[i] + shift :][: sizes[i]] of fewer than limit bytes (None for
    the others): one native call for them all (cloudvault/_plainruns.c, one SIMD lane per chunk), else one `blake3`
    call each."""
    if _plainruns is not None:
        return _plainruns.hex_digests(buffer, starts, sizes, shift, limit)
    hash_of = blake3.blake3
    return [hash_of(buffer[at + shift : at + shift + size]).digest().hex() if size < limit else None
            for at, size in zip(starts, sizes, strict=True)]  # fmt: skip


def hash_file_pieces(path: str | bytes | os.PathLike) -> tuple[str, bytes | None]:
    """(BLAKE3, piece hashes) of a file; a big file memory-mapped and hashed on all cores: its pieces' values and the
    whole hash merged from them where ONE_PASS, else the whole hash and then each piece's."""
    size = os.stat(path).st_size
    if size < MMAP_THRESHOLD:
        with open(path, "rb") as fh:
            return hash_stream_pieces(fh)
    from concurrent.futures import ThreadPoolExecutor

    with _mapped(path) as view, ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        if ONE_PASS:  # each piece's value on all cores, the whole hash merged from them: one pass over the map
            first = pool.submit(first_piece_values, view[:PIECE])  # its parts' values from the same hashing
            rest = _each_piece(pool, view, size, piece_value, PIECE)
            value, parts = first.result()
            return one_pass_result(value + rest, parts)
        h = blake3.blake3(max_threads=blake3.blake3.AUTO)
        h.update(view)
        return h.hexdigest(), _each_piece(pool, view, size, lambda data, _: piece_digest(data))


@contextlib.contextmanager
def _mapped(path):
    """A view of the whole file, memory-mapped (released, and the map closed, at the block's end)."""
    import mmap

    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        try:
            yield view
        finally:
            view.release()


def _each_piece(pool, view, size: int, work, start: int = 0) -> bytes:
    """work(piece's view, index) of every PIECE of the mapped file from offset `start` on, on the pool's threads
    (blake3 and the extension let the GIL go on big inputs), joined in order."""
    return b"".join(pool.map(lambda at: work(view[at : at + PIECE], at // PIECE), range(start, size, PIECE)))


def hash_stream_pieces(fh) -> tuple[str, bytes | None]:
    """(BLAKE3, piece hashes) of what is left to read in a binary file object."""
    h = PieceHasher()
    while chunk := fh.read(CHUNK):
        h.update(chunk)
    return h.hexdigest(), h.pieces()


def hash_file(path: str | bytes | os.PathLike) -> str:
    """BLAKE3 of a file; big files are memory-mapped and hashed on all cores."""
    size = os.stat(path).st_size
    if size >= MMAP_THRESHOLD:
        h = blake3.blake3(max_threads=blake3.blake3.AUTO)
        h.update_mmap(os.fsdecode(path))
        return h.hexdigest()
    with open(path, "rb") as fh:
        return hash_stream(fh)


def hash_stream(fh) -> str:
    """BLAKE3 of what is left to read in a binary file object, read in CHUNK pieces."""
    h = blake3.blake3()
    while chunk := fh.read(CHUNK):
        h.update(chunk)
    return h.hexdigest()


class BackgroundHasher:
    """BLAKE3 (and piece hashes) of a stream of chunks, computed in its own thread (blake3 releases the GIL), so
    hashing an archive's compressed bytes does not slow the thread that decompresses them. Chunks must not be
    mutated after update.
    With threads > 1, each chunk is itself hashed on up to that many cores (an archive read at many GB/s)."""

    def __init__(self, threads: int = 1) -> None:
        import queue  # here, not at the top: `vault extract` imports this module and never hashes in a thread
        import threading

        self._hash = PieceHasher(threads)
        self._queue = queue.Queue(maxsize=16)
        self._thread = threading.Thread(target=self._run, name="blake3", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not None:
            self._hash.update(chunk)

    def update(self, chunk: bytes) -> None:
        self._queue.put(chunk)

    def hexdigest(self) -> str:
        self._queue.put(None)
        self._thread.join()
        return self._hash.hexdigest()

    def pieces(self) -> bytes | None:
        """The stream's piece hashes (after hexdigest)."""
        return self._hash.pieces()


class HashJob:
    """One stream of bytes hashed by a `HashThreads` thread: views are added in order, each with the function that
    releases it once hashed; `end` closes the stream, `hexdigest` waits for the hash."""

    def __init__(self) -> None:
        import queue
        import threading

        self._views: queue.SimpleQueue = queue.SimpleQueue()
        self._done = threading.Event()
        self._digest = ""
        self._pieces: bytes | None = None

    def add(self, view, release) -> None:
        self._views.put((view, release))

    def end(self) -> None:
        self._views.put(None)

    def run(self) -> None:
        h = PieceHasher()
        while (item := self._views.get()) is not None:
            view, release = item
            h.update(view)
            release()
        self._digest, self._pieces = h.hexdigest(), h.pieces()
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def hexdigest(self) -> str:
        self._done.wait()
        return self._digest

    def pieces(self) -> bytes | None:
        self._done.wait()
        return self._pieces


class HashThreads(JobThreads):
    """Threads that hash many streams at once (one each, in the order they were started): an archive's members,
    while the thread that walks the archive walks on. `close()` lets the started jobs be hashed, then the threads
    end."""

    def __init__(self, threads: int) -> None:
        super().__init__(threads, "blake3-member")

    def start(self) -> HashJob:
        return self.submit(HashJob())


class PieceThread:
    """A thread that hashes an update's pieces while the caller hashes the same bytes whole (blake3 lets the GIL go
    on large inputs): the two passes piece hashes take run on two cores, and neither outlives the update, so the
    bytes need stay valid only as long as an update call. `close()` ends the thread."""

    def __init__(self) -> None:
        import threading

        self._go, self._done = threading.Semaphore(0), threading.Semaphore(0)
        self._job: tuple | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="blake3-pieces", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self._go.acquire()
            if self._job is None:
                return
            work, data = self._job
            try:
                work(data)
            except BaseException as exc:  # handed to the caller
                self._error = exc
            self._done.release()

    def run_beside(self, work, data, own) -> None:
        """work(data) on this thread and own(data) on the caller's, both done on return."""
        self._job = (work, data)
        self._go.release()
        try:
            own(data)
        finally:  # the thread is done with data before anyone may reuse it, whatever failed
            self._done.acquire()
            self._job = None
            error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self) -> None:
        self._job = None
        self._go.release()
        self._thread.join()
