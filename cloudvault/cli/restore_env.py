"""Restore the lab's Python envs from the mirror's env archives: at their recorded prefix, or relocated.

RECIPE names where the archives are (nebius: 015 data/miniforge3_tar/*.tar.zst packed at
/mnt/filesystem-h8/miniforge3; runpod: 017 data/workspace/cs/backup/env-*.tar.zst packed at /workspace/env);
every env folder of the archives it finds (conda-meta/ or pyvenv.cfg) is an env, named by its folder (envs/NAME;
`base` for a conda root holding envs/*). With no ENV, all of them. Venvs keep their interpreter links; a missing
base python is exit 6 unless --python names one of the same major.minor (docs/envs.md).

  vault restore env nebius --list                                   envs, sizes, python, torch, CUDA build
  vault restore env nebius --dry-run                                the plan, reading only conda-meta
  vault restore env nebius specdec --prefix ~/envs/specdec          one env, relocated
  vault restore env nebius --to ~/miniforge3                        every env under ROOT/envs/NAME
  vault restore env nebius specdec --move ~/envs/specdec --prefix ~/moved/specdec   move a restored env again

Each archive is streamed once, every file verified (catalog BLAKE3, conda-meta sha256, pip RECORD) into a
staging folder beside the target that is renamed into place at the end: Ctrl-C or kill leaves nothing at the
target. Relocating rewrites text holding the old prefix (long #! lines become conda's /bin/sh trampoline),
patches binaries NUL-padded within conda's placeholder length, makes ELF run paths $ORIGIN-relative and compiles
byte-code again with the env's python. The recipe's smoke checks then run inside the env; each restore is
recorded in the catalog (`vault search restored`, `vault show 015`). Every target is checked before the first
write: never /, in or around a mirror, outside --to ROOT, or over other envs. Exit 2: target exists (--force),
refused target, bad recipe, or a file the new prefix does not fit (--allow-unpatched); 3: unknown env; 4: a name
two envs share; 5: damaged archive, unsafe member or env name; 6: no space, prefix not creatable, or a smoke
check failed.
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, opened_catalog


def add_arguments(parser) -> None:
    parser.add_argument("recipe", help="env recipe: nebius, runpod, your own name under $VAULT_RECIPES/env, or a .toml")
    parser.add_argument("envs", nargs="*", metavar="ENV",
                        help="env names (default: every env the recipe finds); ARCHIVE:FOLDER names one of several "
                        "envs of one name")  # fmt: skip
    parser.add_argument("--list", action="store_true", help="list the envs with sizes, python, torch and CUDA build")
    parser.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--prefix", help="restore one env at this prefix")
    where.add_argument("--to", metavar="ROOT", help="restore under ROOT, keeping each env's folder (ROOT/envs/NAME)")
    parser.add_argument("--force", action="store_true", help="replace an existing target (swapped at the end)")
    parser.add_argument(
        "--allow-unpatched",
        action="store_true",
        help="place the env even when some file cannot hold the new prefix (they are listed)",
    )
    parser.add_argument(
        "--move",
        metavar="FROM",
        help="move an env vault restored at FROM to --prefix/--to (relocated again), then remove FROM",
    )
    parser.add_argument("--python", metavar="PATH", help="run a venv on this python (same major.minor as its own)")
    parser.add_argument("--no-checks", action="store_true", help="skip the recipe's smoke checks")
    add_output_options(parser)


def run(args) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import restore_env as view
    from cloudvault.restore.env import actions
    from cloudvault.restore.env.source import EnvRecipe

    options = _options(args)
    recipe = EnvRecipe(args.recipe)
    ui = UI(as_json=args.json)
    with opened_catalog(args, readonly=args.list or args.dry_run) as conn:
        if args.list:
            result, show = actions.list_envs(conn, recipe, options), view.show_list
        elif args.dry_run:
            result, show = actions.plan_envs(conn, recipe, options), view.show_plans
        else:  # each env said as it ends; a smoke check that failed is exit 6 once all are said
            result = actions.restore_envs(conn, recipe, options, ui.progress, lambda one: view.show_one(ui, one))
            show = None
    if args.json or show:  # a restore's envs were each said as it ended: only --json has more to print
        ui.present(result, show)
    if failure := actions.failure(result):
        raise failure
    return errors.OK


def _options(args):
    """The options, each path checked once (an empty one is a usage error)."""
    from pathlib import Path

    from cloudvault.restore.env.actions import EnvOptions
    from cloudvault.restore.env.restore import Choices

    for option in ("prefix", "to", "move", "python"):
        if getattr(args, option) is not None and not getattr(args, option).strip():
            raise errors.UsageError(detail=f"--{option} needs a path")
    choices = Choices(force=args.force, allow_unpatched=args.allow_unpatched, smoke=not args.no_checks,
                      python=args.python)  # fmt: skip
    moving = Path(args.move).expanduser().absolute() if args.move else None
    return EnvOptions(tuple(args.envs), args.prefix, args.to, moving, choices)
