"""Rebuild what the mirror holds: `vault restore env nebius`, `vault restore docker tandemspec`.

Each kind has its own help: `vault restore env --help`, `vault restore docker --help`.
"""

from __future__ import annotations

import importlib

KINDS = {"env": "cloudvault.cli.restore_env", "docker": "cloudvault.cli.restore_docker"}


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="restore_kind", metavar="KIND", parser_class=type(parser), required=True,
                                prog="vault restore")  # fmt: skip
    for kind, module_name in KINDS.items():
        module = importlib.import_module(module_name)
        doc = (module.__doc__ or "").strip()
        cmd = sub.add_parser(kind, help=doc.splitlines()[0].replace("%", "%%"), description=doc,
                             prog=f"vault restore {kind}")  # fmt: skip
        module.add_arguments(cmd)
        cmd.set_defaults(run=module.run)


def run(args) -> int:  # replaced by the kind's own run through set_defaults
    return args.run(args)
