"""Stage a whole env archive on every core: its frames decoded in parallel (ParallelFrameStream, as `vault index`
reads a pzstd archive), the tar walked once in order, and each file written, BLAKE3-checked against the catalog,
sha256-hashed (for conda-meta and pip RECORD) and scanned for the old prefix by a pool of writer threads. A file's
bytes are written only in pieces that verified (io.members.PieceGate): staging never holds an unverified byte.

The walk's thread keeps what must stay in order: folders, symlinks (each judged against the links already
written), hardlinks, and the member list checked against the catalog (type and size of every member at its
offset). A writer gets views of the decoded pieces, pinned until written, so memory stays a few frames deep.

A signal, or any error, stops it all at once (jobthreads.StopOnSignal): the decoders told to stop, every started
file job given its end (its views are let go unwritten), the writers' threads ended, and their join bounded; so
the process ends within seconds whatever line the signal lands on, and the staging folder is removed by its owner.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import threading
from tempfile import SpooledTemporaryFile

import blake3

from cloudvault.archive.tar import TarFormatError, iter_members
from cloudvault.archive.zstdframes import ParallelFrameStream, ThreadedFrameStream, ZstdFormatError, looks_multi_frame
from cloudvault.catalog.lookup import archive_pieces
from cloudvault.errors import HashMismatch, IntegrityError
from cloudvault.io.members import SPOOL_IN_MEMORY, PieceCheck, PieceGate, archive_source
from cloudvault.jobthreads import JobThreads, StopOnSignal
from cloudvault.models import Member
from cloudvault.progress import Progress
from cloudvault.restore.env.prefix import PrefixScanner
from cloudvault.restore.env.stage import SKIPPED_TYPES, Staged, StagingArea, _stage_one, env_relative

SMALL = 64 << 10  # a smaller file's bytes are copied to its writer; a larger one's views are pinned
IO_CHUNK = 1 << 20


def cores() -> int:
    from cloudvault.index.budget import cores_present

    return cores_present()


def can_stage_in_parallel(members: list[Member]) -> bool:
    """One archive, no sparse member (those take the member reader's path)."""
    archives = {m.file_id for m in members if m.archive is not None}
    return len(archives) == 1 and all(m.archive is not None and m.sparse_map is None for m in members)


class _FileJob:
    """One file's bytes on their way to disk, hashed and scanned by the writer thread that took the job."""

    __slots__ = ("fd", "rel", "member", "views", "scan", "stopping", "error", "sha256", "holding", "done", "check")

    def __init__(self, fd: int, rel: str, member: Member, scan: bytes | None, pieces: bytes | None,
                 stopping: threading.Event) -> None:  # fmt: skip
        self.fd, self.rel, self.member, self.scan, self.stopping = fd, rel, member, scan, stopping
        self.check = PieceCheck(member.label, member.size, member.blake3, pieces)
        self.views: queue.SimpleQueue = queue.SimpleQueue()
        self.error: BaseException | None = None
        self.sha256 = ""
        self.holding: bool | None = None  # has a NUL byte, when it holds the old prefix
        self.done = threading.Event()

    def run(self) -> None:
        withhold = not self.check.by_piece and self.member.blake3 is not None  # recorded before piece hashes
        try:  # withheld: the whole file held back (spooled) until its BLAKE3 matches
            with SpooledTemporaryFile(SPOOL_IN_MEMORY) if withhold else contextlib.nullcontext() as held:
                self._write(held)
        except BaseException as exc:
            self.error = self.error or exc
        finally:
            os.close(self.fd)
            self.done.set()

    def _write(self, held) -> None:
        b3, sha = blake3.blake3(), hashlib.sha256()
        gate = PieceGate(self.check) if self.check.by_piece else None
        scanner = PrefixScanner(self.scan) if self.scan else None
        while (item := self.views.get()) is not None:
            view, release = item
            try:
                if self.error is not None or self.stopping.is_set():  # stopped: let the views go unwritten
                    pass
                elif held is not None:
                    held.write(view)
                    b3.update(view)
                else:
                    for part in gate.feed(view) if gate else (view,):
                        self._out(part, sha, scanner)
            except BaseException as exc:  # kept for the walk's thread; the views still drain and unpin
                self.error = exc
            finally:
                release()
        if self.stopping.is_set():  # the pass is ending: nothing more is written or checked
            return
        if self.error is None:
            self._verify(gate, b3.hexdigest(), held)
        if self.error is None:
            while held is not None and (chunk := held.read(IO_CHUNK)):
                self._out(chunk, sha, scanner)
            os.fchmod(self.fd, self.member.mode & 0o1777)  # setuid/setgid bits are not restored
            os.utime(self.fd, (self.member.mtime, self.member.mtime))
            self.sha256 = sha.hexdigest()
            if scanner and scanner.found:
                self.holding = scanner.has_nul

    def _out(self, part, sha, scanner: PrefixScanner | None) -> None:
        _write_all(self.fd, part)
        sha.update(part)
        if scanner:
            scanner.feed(part if isinstance(part, bytes) else bytes(part))

    def _verify(self, gate: PieceGate | None, found: str, held) -> None:
        if gate is not None:
            gate.end()
        elif held is not None and found != self.member.blake3:
            self.error = HashMismatch(path=self.member.label, expected=self.member.blake3, found=found)
        elif held is not None:
            held.seek(0)


def _write_all(fd: int, view) -> None:
    view = memoryview(view)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class _Writers(JobThreads):
    """Threads that take file jobs in the order they were started and write each whole; `failed` is set once any
    job has failed. Stopped, every started job gets its end (None) at once: none waits for views to come."""

    def __init__(self, threads: int) -> None:
        self.started: list[_FileJob] = []
        self.failed = threading.Event()
        super().__init__(threads, "env-writer")

    def ran(self, job: _FileJob) -> None:
        if job.error is not None:
            self.failed.set()

    def start(self, job: _FileJob) -> _FileJob:
        self.started.append(job)  # before it is submitted: a stop from here on ends it
        return self.submit(job)

    def stop(self) -> None:
        super().stop()
        for job in list(self.started):
            job.views.put(None)

    def close(self, *, join: bool = True) -> None:
        super().close(join=join)


class _Staging:
    """The writers, the archive file and its frame stream of one parallel pass, started and stopped as one:
    `stop()` (from a signal handler too) never blocks for long, `close()` waits for the writers (a stopped pass:
    a bounded wait) and ends the stream; both may run twice, and on a pass that never started."""

    def __init__(self) -> None:
        self.writers: _Writers | None = None
        self.fh = self.stream = None

    def start(self, opener, threads: int) -> None:
        self.writers = _Writers(threads)
        self.fh = opener()
        head = self.fh.read(32)
        size = self.fh.seek(0, 2)
        self.fh.seek(0)
        multi = looks_multi_frame(head, size)
        self.stream = ParallelFrameStream(self.fh, opener, threads) if multi else ThreadedFrameStream(self.fh)

    def stop(self) -> None:
        if self.writers is not None:
            self.writers.stop()
        if self.stream is not None:
            self.stream.stop()  # no join here (a handler may hold a queue's lock): they give up within a poll (50 ms)

    def close(self) -> None:
        with contextlib.ExitStack() as ending:  # each step runs even when one before it raised
            if self.fh is not None:
                ending.callback(self.fh.close)
            if self.stream is not None:
                ending.callback(self.stream.close)
            if self.writers is not None:
                self.writers.close(join=True)


def stage_parallel(conn, members: list[Member], area: StagingArea, progress: Progress,
                   threads: int | None = None) -> Staged:  # fmt: skip
    """Write members (all of one archive) under area in one parallel pass; raises UnsafeMember, HashMismatch,
    IntegrityError (an archive that is not what the catalog says), OSError (a full disk), and a signal's error
    once every thread of the pass has been told to end."""
    threads = max(2, threads or cores())
    opener, _frames = archive_source(conn, members[0].file_id)
    pieces = archive_pieces(conn, members[0].file_id)
    wanted = {m.data_offset: (m, pieces.get((m.data_offset, m.path))) for m in members}  # with its piece hashes
    staged = Staged()
    hardlinks: list[tuple[str, str]] = []
    run = _Staging()
    with StopOnSignal(run.stop) as signals:
        try:
            run.start(opener, threads)
            signals.arm()
            _walk(run.stream, wanted, run.writers, area, staged, progress, hardlinks)
        except BaseException as exc:
            run.stop()
            if isinstance(exc, (ZstdFormatError, TarFormatError)):
                raise IntegrityError(detail=f"damaged archive: {exc}; nothing was restored") from None
            raise
        finally:
            run.close()
    _collect(run.writers, staged, hardlinks)
    if wanted:
        missing = min((m for m, _ in wanted.values()), key=lambda m: m.data_offset)
        raise IntegrityError(detail=f"the archive ends before {missing.label}; nothing was restored")
    return staged


def _collect(writers: _Writers, staged: Staged, hardlinks: list[tuple[str, str]]) -> None:
    """The writers' results into staged (the first job's error raised); hardlinks take their targets' hashes."""
    for job in writers.started:
        if job.error is not None:
            raise job.error
        staged.sha256[job.rel] = job.sha256
        if job.holding is not None:
            staged.holding_prefix[job.rel] = job.holding
    for rel, target in hardlinks:  # their hashes are their targets', known once the writers are done
        staged.sha256[rel] = staged.sha256.get(target, "")
        if target in staged.holding_prefix:
            staged.holding_prefix[rel] = staged.holding_prefix[target]


def _walk(stream, wanted: dict[int, tuple[Member, bytes | None]], writers: _Writers, area: StagingArea,
          staged: Staged, progress: Progress, hardlinks: list) -> None:  # fmt: skip
    """The tar walk: each member the catalog lists at its offset placed (folders, links) or handed to a writer."""
    for header, data in iter_members(stream, _refuse_damage):
        member, pieces = wanted.pop(header.data_offset, (None, None))
        if member is None:
            continue
        if header.type != member.type or (member.type == "file" and header.size != member.size):
            raise IntegrityError(detail=f"{member.label} is not the member the catalog indexed; nothing was restored")
        rel = env_relative(member.path, area.folder)
        if rel is None or member.type in SKIPPED_TYPES:
            continue
        if writers.failed.is_set():
            return  # the writer's error is raised once the writers are done
        if member.type != "file":
            _stage_one(None, member, rel, area, staged, progress)
            if member.type == "hardlink":
                hardlinks.append((rel, env_relative(member.link_target or "", area.folder) or ""))
            continue
        _start_file(writers, stream, data, member, rel, area, pieces)
        staged.files += 1
        staged.bytes += member.size
        progress.advance(member.size)


def _start_file(writers: _Writers, stream, data, member: Member, rel: str, area: StagingArea,
                pieces: bytes | None) -> None:  # fmt: skip
    out = area.landing.path_for(member, rel)
    folder = os.path.dirname(out)
    if folder not in area.made_dirs:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        area.made_dirs.add(folder)
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # the same path twice in one archive: the later one wins, as with tar
        if os.path.isdir(out) and not os.path.islink(out):
            raise
        os.unlink(out)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    job = writers.start(_FileJob(fd, rel, member, area.old.encode() if area.scan else None, pieces, writers.stopping))
    try:
        if member.size <= SMALL:
            first = data.first_view(SMALL)
            job.views.put((bytes(first), _nothing))
            for view in data.views():  # a piece boundary may split even a small member
                job.views.put((bytes(view), _nothing))
        else:
            for view in data.views(IO_CHUNK):
                job.views.put((view, stream.pin()))
    finally:
        job.views.put(None)


def _nothing() -> None:
    return None


def _refuse_damage(kind: str, offset: int, detail: str) -> None:
    raise IntegrityError(detail=f"damaged archive ({kind}): {detail} at offset {offset}; nothing was restored")
