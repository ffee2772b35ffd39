"""The Typer app: options and help for every command; each body calls one run_* function."""

from __future__ import annotations

from typing import Annotated

import typer

from cloudvault import __version__

app = typer.Typer(
    name="vault",
    help="cloudvault: search, extract from, restore and re-run a research group's cloud backup mirror.\n\n"
    "Exit codes: 0 ok, 1 nothing found, 2 usage, 3 not found, 4 ambiguous ID, 5 integrity (hash mismatch, "
    "damaged archive), 6 environment (missing tool, busy catalog, no space), 130 interrupted.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

Json = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


class State:
    catalog: str | None = None


def _version(value: bool) -> None:
    if value:
        print(f"vault {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    catalog: Annotated[
        str | None,
        typer.Option("--catalog", help="Catalog file (default: $VAULT_CATALOG, else the XDG data dir)."),
    ] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show version.")] = False,
) -> None:
    State.catalog = catalog


@app.command("index")
def index_cmd(
    mirrors: Annotated[list[str] | None, typer.Argument(help="Mirror roots; none: the known ones.")] = None,
    definition: Annotated[
        str | None, typer.Option("--mirror", help="A mirror definition TOML (catalogs/*.toml) or a built-in name.")
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes for archives (default 2 if many).")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for another indexer on this catalog to finish.")] = False,
    optimize: Annotated[
        bool, typer.Option("--optimize", help="Also write seekable copies of single-frame archives, same pass.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
    as_json: Json = False,
) -> None:
    """Walk mirrors: every file and every member of every .tar.zst, into the catalog. Re-runs are incremental.

    Exit 0 when nothing was flagged as damaged, 5 when an archive or file was (truncated, corrupt, unreadable,
    unsafe member paths, listing mismatch). Secrets found are flagged and reported, never stored.
    """
    from cloudvault.cli.index import run_index

    raise typer.Exit(run_index(State.catalog, mirrors or [], definition, workers, wait, quiet, as_json, optimize))


@app.command("search")
def search_cmd(
    terms: Annotated[list[str], typer.Argument(help="Terms; every one must match (case-insensitive substrings).")],
    entry: Annotated[str | None, typer.Option(help="Only this entry (ID or unique prefix).")] = None,
    kind: Annotated[list[str] | None, typer.Option(help="entry, doc, file or member; repeat for several.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many results per kind; 0 for all.")] = 20,
    as_json: Json = False,
) -> None:
    """Find experiments, docs, files and archive members by keyword: `vault search granite`.

    Exit 0 with hits, 1 with none.
    """
    from cloudvault.cli.search import run_search

    raise typer.Exit(run_search(State.catalog, terms, entry, kind or [], limit, as_json))


@app.command("show")
def show_cmd(
    entry: Annotated[str, typer.Argument(help="Entry ID or unique prefix: 014.")], as_json: Json = False
) -> None:
    """One entry's metadata: what, node/GPU, dates, size, key files, cautions, settings, flags."""
    from cloudvault.cli.show import run_show

    raise typer.Exit(run_show(State.catalog, entry, as_json))


@app.command("ls")
def ls_cmd(
    entry: Annotated[str, typer.Argument(help="Entry ID or unique prefix.")],
    pattern: Annotated[str | None, typer.Argument(help="Glob over paths, e.g. 'dumps/*.json'.")] = None,
    as_json: Json = False,
) -> None:
    """Files and archive members of an entry, with size, BLAKE3 and archive. Exit 1 if none match."""
    from cloudvault.cli.show import run_ls

    raise typer.Exit(run_ls(State.catalog, entry, pattern, as_json))


@app.command("demo")
def demo_cmd(
    directory: Annotated[
        str | None, typer.Option("--dir", help="Where to build the demo mirror (default: the XDG data dir).")
    ] = None,
    as_json: Json = False,
) -> None:
    """Build the built-in demo Marvell_cloud mirror, index it into its own catalog, and walk the journeys."""
    from cloudvault.cli.demo import run_demo

    raise typer.Exit(run_demo(State.catalog, directory, as_json))


@app.command("extract")
def extract_cmd(
    entry: Annotated[str, typer.Argument(help="Entry ID or unique prefix, e.g. 018.")],
    path: Annotated[
        str, typer.Argument(help="Member or file path, unique suffix, glob, directory, or x.tar.zst/inner.")
    ],
    output: Annotated[
        str | None, typer.Option("-o", "--output", help="Folder to write into (default .); - for stdout.")
    ] = None,
    archive: Annotated[str | None, typer.Option(help="Only this archive (unique prefix of its file name).")] = None,
    keep_path: Annotated[bool, typer.Option("--keep-path", help="Keep the member's folders under the output.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    allow_outside_links: Annotated[bool, typer.Option(help="Create symlinks that point outside the output.")] = False,
    as_json: Json = False,
) -> None:
    """Pull members out of an archive without decompressing the rest of it, verified against the catalog's BLAKE3.

    Multi-frame archives are entered at the frame that holds the member; single-frame ones are read from the
    start and stop at the member's end. Exit 5 on a hash mismatch or a changed archive (nothing is left behind).
    """
    from cloudvault.cli.extract import run_extract

    raise typer.Exit(
        run_extract(State.catalog, entry, path, output, archive, keep_path, force, allow_outside_links, as_json)
    )


@app.command("verify")
def verify_cmd(
    entry: Annotated[str | None, typer.Argument(help="Entry ID or prefix; none: every entry.")] = None,
    sample: Annotated[str | None, typer.Option(help="Check a random fraction across the mirror, e.g. 5%.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for --sample, to repeat a check.")] = None,
    as_json: Json = False,
) -> None:
    """Re-hash what the catalog recorded and name every mismatch. Exit 0 all match, 5 mismatches."""
    from cloudvault.cli.verify import run_verify

    raise typer.Exit(run_verify(State.catalog, entry, sample, seed, as_json))


@app.command("optimize")
def optimize_cmd(
    entry: Annotated[str | None, typer.Argument(help="Entry ID or prefix; none: every entry.")] = None,
    to: Annotated[str | None, typer.Option("--to", help="Cache folder (default: beside the catalog).")] = None,
    max_gb: Annotated[float | None, typer.Option("--max-gb", help="Most cache space to use, in GiB.")] = None,
    show_status: Annotated[bool, typer.Option("--status", help="Show the copies and the space they use.")] = False,
    as_json: Json = False,
) -> None:
    """Write seekable copies of single-frame archives (4 MiB frames) into a cache beside the catalog.

    The mirror is never touched. Extraction then reads only the frames that cover a member, verified against
    the same BLAKE3, and falls back to the original archive if a copy is gone.
    """
    from cloudvault.cli.verify import run_optimize

    raise typer.Exit(run_optimize(State.catalog, entry, to, max_gb, show_status, as_json))
