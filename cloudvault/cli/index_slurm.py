"""`vault index --slurm N | --status | --resume | --merge`: the Slurm side of `vault index`."""

from __future__ import annotations

from pathlib import Path

from cloudvault import errors


def run_slurm(args) -> int:
    from cloudvault import config
    from cloudvault.cli.ui import UI
    from cloudvault.cli.views import index_slurm as view
    from cloudvault.index import slurm

    modes = [name for name in ("slurm", "status", "resume", "merge") if getattr(args, name)]
    if len(modes) > 1:
        raise errors.UsageError(detail=f"--{modes[0]} and --{modes[1]} cannot be combined")
    if args.dry_run and not args.slurm:
        raise errors.UsageError(detail="--dry-run goes with --slurm N")
    if args.fs_gbps is not None and args.fs_gbps <= 0:
        raise errors.UsageError(detail="--fs-gbps must be a positive bandwidth in GB/s")
    ui = UI(as_json=args.json, quiet=args.quiet)
    path = Path(config.catalog_path(args.catalog, writing=True)).absolute()  # the jobs may start in another folder
    if args.merge:
        from cloudvault.index.slurm_merge import merge_plan

        result = merge_plan(path, wait=args.wait, progress=ui.progress("merging"))
    elif args.status:
        result = slurm.status(slurm.Layout(path))
    elif args.resume:
        result = slurm.resume(slurm.Layout(path), args.partition)
    else:
        options = slurm.SlurmOptions(tuple(args.mirrors), args.definition, args.slurm, args.partition, args.dry_run,
                                     args.fs_gbps)  # fmt: skip
        result = slurm.plan_and_submit(path, options)
    if args.json:
        view.emit(ui, result)
    else:
        view.show(ui, result, slurm.Layout(path), resumed=bool(args.resume))
    return errors.INTEGRITY if getattr(result, "damaged", False) else errors.OK
