"""Load the mirror's docker images back into dockerd, verified: `vault restore docker tandemspec`.

NAME is a recipe in recipes/docker/ (tandemspec, neo, headinfer) or $VAULT_RECIPES/docker/, or a path to one.
From the archive (default), `images/NAME.tar.zst` is decompressed and streamed into the daemon with no copy on
disk; its sha256 is checked against SHA256SUMS, every blob against its digest and every layer against the
config's diff_ids as it passes, and the stream's tail is held back until all of that matched, so a damaged
archive loads nothing (exit 5). `--from registry` pulls repository@digest with your own docker login and proves
it is the archive's image (same config digest). Before any byte is loaded: the image's CUDA arch list against
this machine's GPU (exit 6 naming both when it cannot run), the daemon (DOCKER_HOST), free space in its data
root, and tags held by other images (exit 6 unless --retag). Every restore is recorded in the catalog.

  vault restore docker --list                   the images: archive, size, tags, config digest, CUDA, arch list
  vault restore docker tandemspec --check-gpu   only the GPU check (no daemon needed)
  vault restore docker neo --check-gpu --scan-kernels   each CUDA library's kernels (needs: cuobjdump)
  vault restore docker tandemspec --dry-run     every check, nothing loaded (needs: a docker daemon)
  vault restore docker neo --from registry --digest sha256:...   (needs: a registry and your `docker login`)
"""

from __future__ import annotations

from cloudvault import errors
from cloudvault.cli.common import add_output_options, opened_catalog


def add_arguments(parser) -> None:
    parser.add_argument("name", nargs="?", help="image recipe: tandemspec, neo, headinfer, or a .toml path")
    parser.add_argument("--list", action="store_true", help="list the image recipes and what their archives hold")
    parser.add_argument("--from", dest="source", choices=("archive", "registry"), default="archive",
                        help="load the mirror's archive (default), or pull repository@digest")  # fmt: skip
    parser.add_argument("--digest", help="registry manifest digest to pull (when the recipe records none)")
    parser.add_argument("--dry-run", action="store_true", help="run every check, load nothing")
    parser.add_argument("--check-gpu", action="store_true", help="only check the image's arch list against the GPU")
    parser.add_argument("--require-gpu", action="store_true", help="fail (exit 6) when this machine has no GPU")
    parser.add_argument("--ignore-gpu", action="store_true", help="load even if the GPU cannot run the image")
    parser.add_argument("--scan-kernels", action="store_true",
                        help="also list every CUDA library's device code (cuobjdump; reads all layers)")  # fmt: skip
    parser.add_argument("--retag", action="store_true", help="move tags that other images hold to this one")
    parser.add_argument("--timeout", type=float, help="seconds to wait on the daemon (default: sized to the image)")
    add_output_options(parser, quiet=True)


def run(args) -> int:
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import restore_docker as view
    from cloudvault.restore.docker import actions

    options = _options(args)
    ui = UI(as_json=args.json, quiet=args.quiet)
    with opened_catalog(args, readonly=args.dry_run or args.check_gpu, optional=args.list or args.check_gpu) as conn:
        if args.list:
            result, show = actions.list_images(conn, _recipes(args.name)), view.show_list
        elif options.checking:
            result, show = actions.check_image(conn, options), view.show_checked
        else:
            result, show = actions.restore_image(conn, options, ui.progress, ui.warn), view.show_restored
    ui.present(result, show)
    failure = actions.failure(result)
    if failure and not args.json:  # the document says how the check ended; on a terminal, its error line
        raise failure
    return failure.exit_code if failure else errors.OK


def _options(args):
    """The recipe, loaded before the catalog is opened (a bad or unknown one is its own error), and the choices;
    None with --list (it loads each recipe it lists)."""
    from cloudvault.restore.docker.actions import DockerOptions
    from cloudvault.restore.docker.restore import Choices
    from cloudvault.restore.docker.source import load_docker_recipe

    if args.list:
        return None
    if not args.name:
        raise errors.UsageError(detail="name an image to restore (see `vault restore docker --list`)")
    choices = Choices(load_docker_recipe(args.name), args.source, require_gpu=args.require_gpu,
                      ignore_gpu=args.ignore_gpu, retag=args.retag)  # fmt: skip
    return DockerOptions(choices, args.digest, args.dry_run, args.check_gpu, args.scan_kernels, args.timeout)


def _recipes(name: str | None) -> tuple:
    """--list: the recipe named, or every recipe."""
    from cloudvault.restore.docker.source import load_docker_recipe, recipe_names

    return tuple(load_docker_recipe(n) for n in ([name] if name else recipe_names()))
