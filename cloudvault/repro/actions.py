"""What `vault repro` does, one call from the command line: list the recipes, dry-run one, or run it (--repeat N
times, or detached); the mode's combinations are checked here, and each mode returns a frozen result
(outcomes.py)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from cloudvault.errors import UsageError
from cloudvault.repro.outcomes import DryRun, RecipesListed, RunBatch, RunQueued
from cloudvault.repro.plan import RunOptions
from cloudvault.repro.recipe import Recipe
from cloudvault.repro.run import Feedback

LIST, DRY_RUN, RUN = "list", "dry run", "run"


@dataclass(frozen=True)
class ExecutorChoice:
    """--executor and its own options: docker's image and catalog, Slurm's partition."""

    name: str = "local"
    image: str | None = None
    catalog: str | None = None
    partition: str | None = None

    def make(self):
        """A new executor of this choice (each run of a batch has its own)."""
        from cloudvault.repro.executors import executor

        own = {"docker": {"image": self.image, "catalog": self.catalog}, "slurm": {"partition": self.partition}}
        return executor(self.name, **own.get(self.name, {}))


@dataclass(frozen=True)
class ReproOptions:
    """What `vault repro` was asked: the mode (LIST, DRY_RUN, RUN), the recipe (loaded) and how to run it, where
    (the executor), how many times, and whether to return once the job is queued (detach)."""

    mode: str = LIST
    recipe: Recipe | None = None
    run: RunOptions | None = None
    executor: ExecutorChoice = field(default_factory=ExecutorChoice)
    repeat: int = 1
    detach: bool = False


def repro(conn: sqlite3.Connection | None, options: ReproOptions,
          feedback: Feedback | None = None) -> RecipesListed | DryRun | RunBatch | RunQueued:  # fmt: skip
    """The recipes and their last verdicts (LIST; conn None: no catalog yet), the plan and its preflight (DRY_RUN),
    or the runs, each judged against the record as it ends (feedback.judged), or the one detached run queued."""
    from cloudvault.repro.dry_run import dry_run, list_recipes
    from cloudvault.repro.run import reproduce_batch

    if options.mode == LIST:
        return RecipesListed(list_recipes(conn))
    chosen = options.executor.make()
    if options.mode == DRY_RUN:
        return dry_run(conn, options.recipe, chosen, options.run)
    if options.detach and not chosen.queues:
        raise UsageError(detail="--detach needs --executor slurm (a local or docker run ends with vault)")
    if options.repeat > 1 and options.detach:
        raise UsageError(detail="a detached run is one run: --detach takes no --repeat")
    return reproduce_batch(conn, options.recipe, lambda i: options.executor.make() if i else chosen, options.run,
                           feedback, repeat=options.repeat, detach=options.detach)  # fmt: skip
