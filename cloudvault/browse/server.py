"""Serve the catalog read-only in Datasette: the app, the listening socket, and the loop until Ctrl-C."""

from __future__ import annotations

import contextlib
import importlib
import ipaddress
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cloudvault.documents import Document
from cloudvault.errors import EnvironmentProblem, Interrupted, ToolMissing

TEMPLATES = Path(__file__).with_name("templates")
INSTALL_HINT = "install the browse extra: pip install 'cloudvault[browse]' (in a checkout: pip install -e '.[browse]')"


class CannotListen(EnvironmentProblem):
    """cannot listen on {host}:{port} ({reason}); pick another --port, or a --host this machine has"""


def require_datasette() -> None:
    """Datasette and uvicorn are the optional `browse` extra; without them, one line saying how to get them."""
    try:
        import datasette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ToolMissing(tool="Datasette", hint=INSTALL_HINT) from None


def build_app(catalog: Path):
    """The Datasette instance serving catalog as /catalog: mode=ro (immutable in a folder we cannot write)."""
    from datasette.app import Datasette
    from datasette.plugins import pm

    from cloudvault.browse import plugin
    from cloudvault.browse.metadata import metadata

    # Datasette's default error page also prints a rich traceback with locals for every 4xx (bad SQL, a refused
    # write): user mistakes, not bugs, so the terminal stays quiet; a real 500 still prints its traceback
    # (imported after datasette.app: imported first, it would register before it is defined)
    importlib.import_module("datasette.handle_exception").rich = None
    if not pm.is_registered(plugin):
        pm.register(plugin, name="cloudvault-browse")
    ds = Datasette(
        metadata=metadata(plugin.DATABASE, f"/{plugin.DATABASE}"),
        settings={"sql_time_limit_ms": 3000},
        template_dir=str(TEMPLATES),  # query pages titled by their journey, not by kilobytes of SQL
    )
    # same rule as catalog.db: no -shm can be made in a read-only folder, and nobody can write there either
    mutable = os.access(catalog.parent, os.W_OK)
    ds.add_database(plugin.CatalogDatabase(ds, path=str(catalog.absolute()), is_mutable=mutable), name=plugin.DATABASE)
    ds.remove_database("_memory")
    return ds


def listen(host: str, port: int) -> socket.socket:
    """A bound, listening socket (port 0: a free one), so the printed URL is the one being served."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((host, port), family=family)
    except OSError as exc:
        raise CannotListen(host=host, port=port, reason=exc.strerror or str(exc)) from None
    return sock


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@dataclass(frozen=True)
class BrowseOptions:
    """What to serve and where: the catalog file, the address and port to listen on, whether to open a browser."""

    catalog: Path
    host: str
    port: int
    open_browser: bool = True


@dataclass(frozen=True)
class Serving(Document):
    """Where the catalog is served, once the socket listens: its URL, the address, and whether only this machine
    can reach it."""

    catalog: str
    url: str
    host: str
    loopback: bool


def browse_catalog(options: BrowseOptions, serving: Callable[[Serving], None]) -> None:
    """Serve until Ctrl-C, which is how a server is meant to stop (it returns then); serving() is handed where,
    once the socket listens. Without the browse extra, one line saying how to get it."""
    require_datasette()
    with contextlib.suppress(KeyboardInterrupt, Interrupted):
        serve(options, serving)


def serve(options: BrowseOptions, serving: Callable[[Serving], None]) -> None:
    """Serve until Ctrl-C. The catalog is checked first (missing, damaged, too new: the usual one-line errors)."""
    import uvicorn

    from cloudvault.catalog.db import open_catalog

    catalog, host = options.catalog, options.host
    open_catalog(catalog, readonly=True).close()
    ds = build_app(catalog)
    sock = listen(host, options.port)
    try:
        bound_host, bound_port = sock.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        url = f"http://{shown}:{bound_port}/catalog"
        serving(Serving(str(catalog), url, host, is_loopback(host)))
        if options.open_browser:
            import webbrowser

            webbrowser.open(url)
        server = uvicorn.Server(uvicorn.Config(ds.app(), log_level="warning", lifespan="on"))
        server.run(sockets=[sock])
    finally:
        sock.close()
