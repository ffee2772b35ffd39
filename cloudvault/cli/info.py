"""Which catalog vault is using and what it holds: `vault info`.

Names the catalog that answers every command and what chose it: --catalog, $VAULT_CATALOG, your own (the XDG
data dir), or the demo's (the default until `vault index` has built your own). Then its mirrors (root, last
index, entries, files, archives, members, flags), the restores and runs it records, and its schema version.
Exit 0; 3 when there is no catalog there yet (it says where `vault index` would build it).
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, opened_catalog


def add_arguments(parser) -> None:
    add_output_options(parser)


def run(args) -> int:
    from cloudvault import config
    from cloudvault.catalog.summary import catalog_info
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import info as view

    path, origin = config.catalog_origin(args.catalog)
    with opened_catalog(args, readonly=True, optional=True) as conn:
        info = catalog_info(conn, path, origin)
    ui = UI(as_json=args.json)
    ui.present(info, view.show)
    return errors.OK if info.summary else errors.NOT_FOUND
