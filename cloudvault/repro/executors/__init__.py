"""Where a reproduction runs: local processes, a docker container, a Slurm job; one contract (base.Executor).

An executor is named in `vault repro --executor NAME` and in the catalog's runs table; a new one is a module with
a subclass of base.Executor (describe, submit, poll, collect, cancel; the wait loop is the base's), added here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cloudvault.repro.executors.base import Executor

EXECUTORS = {
    "local": "cloudvault.repro.executors.local:LocalExecutor",
    "docker": "cloudvault.repro.executors.docker:DockerExecutor",
    "slurm": "cloudvault.repro.executors.slurm:SlurmExecutor",
}


def executor_class(name: str) -> type[Executor]:
    """The class of the executor of that name (its contract's class attributes: queues, runs_here, job_label)."""
    module, _, cls = EXECUTORS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def executor(name: str, **options) -> Executor:
    """A new executor of that name; options are its own (docker: image, catalog; slurm: partition)."""
    return executor_class(name)(**options)


def with_executor_checks(checks: list, executor: Executor, plan) -> list:
    """The preflight checks with the executor's own (daemon, image, partition, GPUs where it runs) replacing the
    local ones of the same name: a Slurm job's GPUs are the partition's, not this login node's."""
    own = executor.preflight(plan)
    names = {c.name for c in own}
    return [c for c in checks if c.name not in names] + own
