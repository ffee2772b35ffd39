"""Where a reproduction runs: local processes, a docker container, a Slurm job; one interface (base.Executor).

An executor is named in `vault repro --executor NAME` and in the catalog's runs table; a new one (docker, slurm)
is a module with a class implementing describe/submit/wait/collect/cancel, added to EXECUTORS.
"""

from __future__ import annotations

import importlib

EXECUTORS = {"local": "cloudvault.repro.executors.local:LocalExecutor"}


def executor(name: str):
    """A new executor of that name."""
    module, _, cls = EXECUTORS[name].partition(":")
    return getattr(importlib.import_module(module), cls)()
