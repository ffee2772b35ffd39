"""`vault index`: lock the catalog, index the mirrors, print a summary."""

from __future__ import annotations

import argparse
from pathlib import Path

from cloudvault import config, errors
from cloudvault.catalog.db import open_catalog, writer_lock
from cloudvault.cli.fast import QuietParser
from cloudvault.cli.ui import UI, human_size
from cloudvault.index.definition import builtin_definition, load_definition
from cloudvault.index.run import IndexReport, MirrorRoot, index_mirrors, resolve_root


def _roots(conn, paths: list[str], definition: str | None) -> list[MirrorRoot]:
    mdef = None
    if definition:
        mdef = load_definition(Path(definition)) if definition.endswith(".toml") else builtin_definition(definition)
        paths = paths or list(mdef.roots)
    if not paths:
        paths = [row[0] for row in conn.execute("SELECT root FROM mirrors ORDER BY id")]
    if not paths:
        raise errors.UsageError(detail="give a mirror path to index (e.g. `vault index /path/to/Marvell_cloud`)")
    known = {
        root: (name, manifest) for name, root, manifest in conn.execute("SELECT name, root, manifest FROM mirrors")
    }
    return [resolve_root(p, mdef, known) for p in paths]


def run_index(
    catalog: str | None, paths: list[str], definition: str | None, workers: int | None, wait: bool, quiet: bool,
    as_json: bool, optimize: bool = False,
) -> int:  # fmt: skip
    ui = UI(as_json=as_json, quiet=quiet)
    path = config.catalog_path(catalog)
    with writer_lock(path, wait=wait):
        conn = open_catalog(path, create=True)
        try:
            cache = config.cache_dir(path) if optimize else None
            roots = _roots(conn, paths, definition)
            report = index_mirrors(conn, roots, workers=workers, progress=ui.progress(), copy_cache=cache)
        finally:
            conn.close()
    if as_json:
        ui.emit({"catalog": str(path), **report.__dict__, "damaged": report.damaged})
    elif not quiet:
        _summary(ui, path, report)
    return errors.INTEGRITY if report.damaged else errors.OK


def _summary(ui: UI, catalog: Path, r: IndexReport) -> None:
    rate = r.bytes_read / r.seconds if r.seconds else 0
    ui.line(
        f"indexed {', '.join(r.mirrors)} into {catalog}: {r.files_seen} files seen, {r.files_read} read "
        f"({human_size(r.bytes_read)}, {human_size(int(rate))}/s), {r.files_unchanged} unchanged, "
        f"{r.files_deleted} removed; {r.archives_read} archives, {r.members_indexed} members, {r.seconds:.2f} s"
    )
    for kind, n in sorted(r.flags.items()):
        ui.line(f"  flagged: {n} {kind.replace('_', ' ')}")


def build_parser() -> argparse.ArgumentParser:
    parser = QuietParser(prog="vault index", add_help=False)
    parser.add_argument("mirrors", nargs="*")
    parser.add_argument("--mirror", dest="definition")
    parser.add_argument("--workers", type=int)
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--optimize", action="store_true")
    parser.add_argument("-q", "--quiet", action="store_true")
    parser.add_argument("--json", action="store_true")
    return parser


def fast_runner(catalog: str | None, ns: argparse.Namespace):
    return lambda: run_index(catalog, ns.mirrors, ns.definition, ns.workers, ns.wait, ns.quiet, ns.json, ns.optimize)
