"""`vault index` run here: the catalog checked, locked, opened (made when new), its roots indexed; the run's frozen
typed result (`Indexed`, whose to_json() is `vault index --json`) or the budget a run would have (`--dry-run`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cloudvault.index.budget import Budget
from cloudvault.index.context import IndexReport
from cloudvault.progress import Progress


@dataclass(frozen=True)
class LocalIndex:
    """What `vault index` was asked: the catalog as named (None: $VAULT_CATALOG or the default), the roots (none:
    the known ones), a mirror definition, and how to run (see IndexOptions)."""

    catalog: str | None
    mirrors: tuple[str, ...] = ()
    definition: str | None = None
    workers: int | None = None
    wait: bool = False
    optimize: bool = False  # write seekable copies into the catalog's cache in the same pass
    prune: bool = False
    accept: tuple[str, ...] = ()


@dataclass(frozen=True)
class Indexed:
    """A finished local run: the catalog it wrote and the run's report (its counts, flags, and the mirrors it
    dropped or found empty), no longer written to."""

    catalog: str
    report: IndexReport

    @property
    def damaged(self) -> bool:
        return self.report.damaged

    def to_json(self) -> dict:
        return {"catalog": self.catalog, **vars(self.report), "damaged": self.report.damaged}


def local_budget(request: LocalIndex) -> Budget:
    """`vault index --dry-run`: the cores and memory a run here would use (index/budget.py); nothing is read."""
    from cloudvault import config
    from cloudvault.catalog.mirror_guard import refuse_catalog_inside_mirror
    from cloudvault.index.budget import plan_budget

    local = [m for m in request.mirrors if "://" not in m]
    refuse_catalog_inside_mirror(config.catalog_path(request.catalog, writing=True), local)
    return plan_budget(request.workers)


def index_catalog(request: LocalIndex, progress: Progress | None = None) -> Indexed:
    """Index the roots into the catalog, under its writer lock; a run that fails before indexing anything leaves
    no (empty) catalog behind."""
    from cloudvault import config
    from cloudvault.catalog.db import open_catalog, refuse_non_catalog, writer_lock
    from cloudvault.catalog.mirror_guard import refuse_catalog_inside_mirror
    from cloudvault.index.context import IndexOptions
    from cloudvault.index.roots import roots_to_index
    from cloudvault.index.run import index_mirrors

    local = [m for m in request.mirrors if "://" not in m]
    refuse_catalog_inside_mirror(config.catalog_path(request.catalog, writing=True), local)
    where, origin = config.catalog_origin(request.catalog, writing=True)
    path = Path(where)
    refuse_non_catalog(path, config.NAMED_BY[origin])  # before the lock: a wrong --catalog gets nothing beside it
    with writer_lock(path, wait=request.wait):
        existed, indexing = path.exists(), False
        try:
            conn = open_catalog(path, create=True, named_by=config.NAMED_BY[origin])
            try:
                roots = roots_to_index(conn, list(request.mirrors), request.definition)
                options = IndexOptions(workers=request.workers, prune=request.prune, accept=request.accept,
                                       copy_cache=config.cache_dir(path) if request.optimize else None)  # fmt: skip
                indexing = True
                report = index_mirrors(conn, roots, options, progress=progress)
            finally:
                conn.close()
        except BaseException:
            if not (existed or indexing):
                _remove_new_catalog(path)
            raise
    return Indexed(str(path), report)


def _remove_new_catalog(path: Path) -> None:
    import contextlib

    for name in (path.name, path.name + "-wal", path.name + "-shm", path.name + ".lock"):
        with contextlib.suppress(FileNotFoundError):
            path.with_name(name).unlink()
