"""Search the tasks of a scope: each archive read forward once through the verified reader, in worker processes.

Small members are read together (io.members.read_together: a run of the stream, each member hashed before it is
searched); bigger ones and plain files stream through MemberReader, their lines held until the stream has
verified. A member whose bytes do not verify is a Failure, never searched silently. Lines are redacted (the
index's secret rules) inside the worker, so no secret's value crosses to the parent, the terminal or --json.
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from cloudvault.catalog.flagged import refusal
from cloudvault.errors import ChangedSinceRecorded, HashMismatch, IntegrityError, UnsafeMember
from cloudvault.grep.lines import LineSearch, Shape
from cloudvault.grep.pattern import Pattern
from cloudvault.grep.targets import Task, archive_members, plain_files, plan, resolve_scopes, within_entry
from cloudvault.io.members import CHUNK, MemberReader, read_together
from cloudvault.models import Member
from cloudvault.processes import worker_context

PROGRESS_EVERY = 4 << 20
BATCH = 256  # messages a worker sends at once
MISMATCH = "its bytes do not match the catalog (hash mismatch); not searched"


class GrepOptions(NamedTuple):
    pattern: str
    fixed: bool = False
    ignore_case: bool = False
    word: bool = False
    shape: Shape = Shape()
    globs: tuple[str, ...] = ()
    kind: str | None = None  # file | member | None for both
    max_filesize: int | None = None
    jobs: int = 1


class Found(NamedTuple):
    """The lines of one file or member that matched (count: selected lines; hits: the lines to show)."""

    entry: str
    path: str  # within the entry: the plain file, or the archive that holds member
    archive: str | None  # the archive's mirror path
    member: str | None
    count: int
    hits: list

    @property
    def label(self) -> str:
        where = f"{self.path}::{self.member}" if self.member is not None else self.path
        return f"{self.entry}:{where}" if self.entry else where

    def to_json(self, counted: bool = False) -> list[dict]:
        """Its objects of the `{"matches": [...]}` document: one per line shown (a `--` break is none), or with
        counted (-c, -l) one count (docs/commands/grep.md says the fields)."""
        base = {"entry": self.entry, "path": self.path, "archive": self.archive, "member": self.member}
        if counted:
            return [{"type": "count", **base, "count": self.count}]
        return [{"type": "match" if hit.kind == ":" else "context", **base, "line": hit.line, "offset": hit.offset,
                 "text": hit.text.decode("utf-8", "replace")} for hit in self.hits if hit.kind != "--"]  # fmt: skip


class Failure(NamedTuple):
    """A file, member or archive that could not be searched, and why (one line)."""

    label: str
    message: str


class GrepRequest(NamedTuple):
    """What `vault grep` was asked: the catalog as named (None: $VAULT_CATALOG or the default), the options, the
    scopes (none: the whole catalog), and whether the first match settles it (-q)."""

    catalog: str | None
    options: GrepOptions
    scopes: tuple[str, ...] = ()
    first_settles: bool = False


class Grepped(NamedTuple):
    """How a search ended: whether a line was selected, and whether a file or member could not be searched."""

    found: bool
    failed: bool


class Matching(NamedTuple):
    """How each stream is searched: the pattern, the shape of the output, the redactor of shown lines."""

    pattern: Pattern
    shape: Shape
    redact: object


class Progressed(NamedTuple):
    nbytes: int
    members: int
    current: str


def compiled(options: GrepOptions) -> tuple[Pattern, object]:
    """The pattern, and the redactor every shown line goes through."""
    from cloudvault.index.secrets import DEFAULT_RULES, SecretRules

    pattern = Pattern(options.pattern, fixed=options.fixed, ignore_case=options.ignore_case, word=options.word)
    return pattern, SecretRules(DEFAULT_RULES).redact_bytes


def _unknown_secrets(conn: sqlite3.Connection, task: Task) -> dict[str | None, str]:
    """Member (None: the plain file, by file id) -> a rule the index flagged in it that the default rules do not
    know (a mirror definition's own): every line shown of it is then withheld whole."""
    from cloudvault.catalog.flagged import secret_rules_in
    from cloudvault.index.secrets import DEFAULT_RULES

    ids = (task.file_id,) if task.file_id is not None else task.file_ids
    unknown = {}
    for (file_id, member), rules in secret_rules_in(conn, ids).items():
        if rules - DEFAULT_RULES.keys():
            unknown[member if task.file_id is not None else file_id] = sorted(rules - DEFAULT_RULES.keys())[0]
    return unknown


def _withheld(rule: str):
    text = f"[redacted line: flagged {rule}]".encode()
    return lambda line: text


def search_task(conn: sqlite3.Connection, task: Task, options: GrepOptions, pattern: Pattern, redact) -> Iterator:
    """Found, Failure and Progressed messages for one task, in the order its bytes are read."""
    if task.file_id is None:
        members = plain_files(conn, task, options.max_filesize)
    else:
        members = archive_members(conn, task, options.max_filesize)
    shown = within_entry(task.entry_id, task.path) if task.path else ""
    how = Matching(pattern, options.shape, redact)
    withheld = _unknown_secrets(conn, task)
    seen = [0]  # members taken from the catalog so far
    told, members_told = task.start, 0
    with MemberReader(conn) as reader:
        for small, group in itertools.groupby(_counted(members, seen), key=_small):
            if small and task.file_id is not None:
                found = _small_members(task, reader, group, how, withheld)
            else:
                found = _streamed(task, reader, group, how, withheld)
            try:
                for message in found:
                    if type(message) is not int:
                        yield message
                    elif message - told >= PROGRESS_EVERY:  # how far the task has read, from time to time
                        yield Progressed(message - told, seen[0] - members_told, shown or "plain files")
                        told, members_told = message, seen[0]
            except (IntegrityError, OSError) as exc:  # the archive cannot be read (changed, gone, damaged)
                yield Failure(_label(task, None), _why(exc))
                return
    yield Progressed(max(task.start + task.size - told, 0), seen[0] - members_told, shown or "plain files")


def _counted(members: Iterable[Member], seen: list[int]) -> Iterator[Member]:
    for member in members:
        seen[0] += 1
        yield member


def _small(member: Member) -> bool:
    return member.type == "file" and member.sparse_map is None and member.size <= CHUNK


def _small_members(task: Task, reader: MemberReader, group: Iterable[Member], how: Matching, withheld: dict
                   ) -> Iterator:  # fmt: skip
    """Small members read together and each verified before it is searched: one scan settles most of them."""
    scan, invert = how.pattern.first_end, how.shape.invert
    for n, (member, data) in enumerate(read_together(reader, group), 1):
        if data is None:  # refused by what `vault index` flagged (an encrypted zip member ...), or not as recorded
            why = refusal(reader.conn, member) if member.blake3 is None else None
            yield Failure(_label(task, member), f"{why}; not searched" if why else MISMATCH)
        elif invert or scan(data) >= 0:
            yield from _search_member(task, member, [data], _for(member, how, withheld))
        if not n & 1023:
            yield member.data_offset + member.size


def _streamed(task: Task, reader: MemberReader, group: Iterable[Member], how: Matching, withheld: dict
              ) -> Iterator:  # fmt: skip
    """Bigger members and plain files, each a verified stream."""
    reached = task.start
    for member in group:
        try:
            stream = reader.open(member)
        except (UnsafeMember, ChangedSinceRecorded) as exc:  # this file or member refused, not the whole task
            yield Failure(_label(task, member), _why(exc))
            continue
        yield from _search_member(task, member, stream, _for(member, how, withheld))
        reached = member.data_offset + member.size if task.file_id is not None else reached + member.size
        yield reached


def _for(member: Member, how: Matching, withheld: dict) -> Matching:
    """How this member is searched: as all are, or with its lines withheld (a secret of an unknown rule)."""
    if not withheld:
        return how
    rule = withheld.get(member.path if member.archive else member.file_id)
    return how if rule is None else how._replace(redact=_withheld(rule))


def _search_member(task: Task, member: Member, stream, how: Matching):
    """One member's (or plain file's) Found or Failure, or nothing: its lines are handed out only once verified."""
    search = LineSearch(*how)
    try:
        for chunk in stream:
            if not search.done:
                search.feed(chunk)
            elif search.binary or not search.count:
                break  # skipped (binary): nothing from it is shown, nothing to verify
    except IntegrityError as exc:  # its bytes (a piece of them) do not verify, or its frames are damaged
        yield Failure(_label(task, member), MISMATCH if isinstance(exc, HashMismatch) else _why(exc))
        return
    search.finish()
    if search.count:
        archive = task.path or None
        path = within_entry(task.entry_id, task.path) if archive else member.path
        for hits in search.batches():  # verified: now its lines can go
            if hits or not search.shape.keep_lines:
                yield Found(task.entry_id, path, archive, member.path if archive else None, search.count, hits)


def _label(task: Task, member: Member | None) -> str:
    shown = within_entry(task.entry_id, task.path) if task.path else ""
    if member is None:
        return f"{task.entry_id}:{shown}" if task.entry_id else shown
    where = f"{shown}::{member.path}" if task.file_id is not None else member.path
    return f"{task.entry_id}:{where}" if task.entry_id else where


def _why(exc: BaseException) -> str:
    from cloudvault import errors

    message = exc.message if isinstance(exc, errors.VaultError) else str(exc)
    return errors.one_line(message).replace("; nothing was written", "")


def grep(conn: sqlite3.Connection, catalog: str, options: GrepOptions, scopes: list[str], progress=None) -> Iterator:
    """Found and Failure, as they come, for every file and member of the scopes (whole catalog: none given)."""
    compiled(options)  # a bad pattern is a usage error here, before any worker starts
    tasks = plan(conn, resolve_scopes(conn, scopes), options.kind, options.globs)
    jobs = max(1, min(options.jobs, len(tasks)))
    messages = _in_process(conn, tasks, options) if jobs == 1 else _in_workers(catalog, tasks, options, jobs)
    members = 0
    try:
        if progress is not None:
            progress.start(sum(t.size for t in tasks), len(tasks))
        for message in messages:
            if isinstance(message, Progressed):
                members += message.members
                if progress is not None:
                    progress.advance(message.nbytes)
                    progress.current(f"{members:,} members, {message.current}")
            else:
                yield message
    finally:
        messages.close()
        if progress is not None:
            progress.finish()


def grep_catalog(request: GrepRequest, on_found, on_failure, progress=None) -> Grepped:
    """Search the catalog: on_found(Found) and on_failure(Failure) as they come (with first_settles: stop at the
    first Found, not handed on)."""
    import os

    from cloudvault import config
    from cloudvault.catalog.db import open_catalog

    where, origin = config.catalog_origin(request.catalog)
    conn = open_catalog(where, readonly=True, named_by=config.NAMED_BY[origin])
    found = failed = False
    try:
        for result in grep(conn, os.path.abspath(where), request.options, list(request.scopes), progress):
            if isinstance(result, Failure):
                failed = True
                on_failure(result)
                continue
            found = True
            if request.first_settles:
                break
            on_found(result)
    finally:
        conn.close()
    return Grepped(found, failed)


def _in_process(conn: sqlite3.Connection, tasks: list[Task], options: GrepOptions) -> Iterator:
    pattern, redact = compiled(options)
    for task in tasks:
        yield from search_task(conn, task, options, pattern, redact)


def _in_workers(catalog: str, tasks: list[Task], options: GrepOptions, jobs: int) -> Iterator:
    """Messages from jobs worker processes (they share nothing but two queues with this one), started before the
    first task is queued: queueing starts the queue's feeding thread, and a process with other threads does not
    fork its workers (cloudvault/processes.py)."""
    ctx = worker_context([__name__])
    todo, results = ctx.Queue(), ctx.Queue()
    workers = [ctx.Process(target=_work, args=(catalog, todo, results, options), daemon=True) for _ in range(jobs)]
    try:
        for worker in workers:
            worker.start()
        for task in tasks:
            todo.put(task)
        for _ in range(jobs):
            todo.put(None)
        running = jobs
        while running:
            for message in results.get():
                if message is None:
                    running -= 1
                elif isinstance(message, BaseException):
                    raise message
                else:
                    yield message
    finally:
        started = [worker for worker in workers if worker.pid is not None]
        for worker in started:
            if worker.is_alive():
                worker.terminate()
        for worker in started:
            worker.join()


def _work(catalog: str, todo, results, options: GrepOptions) -> None:
    """A worker: tasks until the None that ends them; messages sent in batches."""
    import signal

    from cloudvault.catalog.db import open_catalog

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to report; it ends the workers
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    batch: list = []
    try:
        conn = open_catalog(catalog, readonly=True)
        pattern, redact = compiled(options)
        last = time.monotonic()
        while (task := todo.get()) is not None:
            for message in search_task(conn, task, options, pattern, redact):
                batch.append(message)
                if len(batch) >= BATCH or time.monotonic() - last > 0.1:
                    results.put(batch)
                    batch, last = [], time.monotonic()
    except Exception as exc:  # a bug: the parent raises it
        batch.append(RuntimeError(f"grep worker: {type(exc).__name__}: {exc}"))
    results.put([*batch, None])
