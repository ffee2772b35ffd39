"""The docker executor: one container per process of the plan (docker-py), in the recipe's image, with the mirror
mounted read-only and the run folder read-write at the same paths, no network, the process's GPU through a device
request and its cores through a cpuset; exit codes and logs are collected, the containers removed afterwards.

The image is `--image REF`, else the first tag of the docker recipe the repro recipe names ([environment] docker);
when the daemon lacks it, it is restored from the mirror's archive (or pulled by digest) as `vault restore docker`
does. The stand-in runs on vault's own Python: that runtime (its prefix, the cloudvault package, the host's /usr and
/lib, /lib64 for the loader and the C library) is mounted read-only into a minimal image such as busybox.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import time
from pathlib import Path

import cloudvault
from cloudvault.errors import EnvironmentProblem, UsageError, VaultError
from cloudvault.repro.executors.base import Executor, Job
from cloudvault.repro.plan import Plan
from cloudvault.repro.preflight import Check, image_fit

STOP_GRACE_S = 5


class NoImage(UsageError):
    """the docker executor needs an image: pass --image REF, or name a docker recipe in [environment] docker"""


class ContainerFailed(EnvironmentProblem):
    """container for {name} could not start in {image}: {detail}"""


class DockerExecutor(Executor):
    name = "docker"
    poll_s = 0.1

    def __init__(self, image: str | None = None, catalog: Path | None = None) -> None:
        self.image, self.catalog = image, catalog
        self._client = None  # docker.APIClient, once submit or cancel connected

    def image_ref(self, plan: Plan) -> str:
        if self.image:
            return self.image
        recipe = _docker_recipe(plan)
        if recipe is None:
            raise NoImage()
        return recipe.tags[0]

    def describe(self, plan: Plan) -> list[str]:
        image = self.image_ref(plan) if self.image or _docker_recipe(plan) else "(no image: pass --image)"
        mounts = " ".join(f"-v {src}:{dst}:{mode}" for src, (dst, mode) in mounts_for(plan).items())
        lines = []
        for p in plan.processes:
            gpu = f" --gpus device={p.gpu}" if _uses_gpu(plan, p) else ""
            cpus = f" --cpuset-cpus {p.cpu_cores[0]}-{p.cpu_cores[-1]}" if _cpuset(p) else ""
            lines.append(f"{p.name}: docker run --rm --network none{gpu}{cpus} {mounts} -w {p.cwd} {image} "
                         f"{shlex.join(p.argv)}")  # fmt: skip
        return lines

    def preflight(self, plan: Plan) -> list[Check]:
        """The daemon answers, the image is there (or restorable), its arch list fits the GPUs the plan uses."""
        from cloudvault.tools import docker as dd

        try:
            daemon = dd.connect(timeout=10)
        except VaultError as exc:
            return [Check("docker", False, exc.message)]
        checks = [Check("docker", True, f"daemon {daemon.version} at {daemon.host}")]
        try:
            ref = self.image_ref(plan)
        except NoImage as exc:
            return [*checks, Check("image", False, exc.message)]
        found = dd.image(daemon, ref)
        recipe = self._restorable(plan)
        if found:
            checks.append(Check("image", True, f"{ref} present ({found['Id'][:19]})"))
        elif recipe is not None:
            checks.append(Check("image", True, f"{ref} missing; restored from {recipe.entry}/{recipe.archive} first"))
        else:
            checks.append(Check("image", False, f"{ref} is not in the daemon; `docker load` or pull it first"))
        return [*checks, _arch_check(plan, found, recipe)]

    def submit(self, plan: Plan) -> Job:
        from cloudvault.tools import docker as dd

        logs = plan.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        (plan.run_dir / "work").mkdir(exist_ok=True)
        daemon = dd.connect(timeout=60)
        image = self.image_ref(plan)
        if dd.image(daemon, image) is None:
            self._restore(plan)
        self._client = daemon.client
        handles: list[str] = []
        try:
            for p in plan.processes:
                Path(p.cwd).mkdir(parents=True, exist_ok=True)
                handles.append(_start(daemon.client, plan, p, image))
        except BaseException:
            self.cancel(Job(plan, handles))
            raise
        return Job(plan, handles, job_id=",".join(h[:12] for h in handles))

    def poll(self, job: Job) -> list[int] | None:
        for i, cid in enumerate(job.handles):
            state = self._client.inspect_container(cid)["State"]
            if job.codes[i] is None and state["Status"] in ("exited", "dead"):
                job.codes[i] = int(state["ExitCode"])
                job.seconds[i] = ran_for(state)
        return None if None in job.codes else [int(c) for c in job.codes]

    def collect(self, job: Job) -> Path:
        """Each container's stdout and stderr into logs/NAME.out and .err, then the container removed."""
        for p, cid in zip(job.plan.processes, job.handles, strict=False):
            _save_logs(self._client, cid, job.plan.run_dir / "logs" / p.name)
            self._client.remove_container(cid, force=True)
        return job.plan.run_dir / "work"  # the run folder is mounted read-write: outputs are there already

    def cancel(self, job: Job) -> None:
        """SIGTERM to every container at once, SIGKILL to those still up after the grace period; logs kept,
        containers removed."""
        if self._client is None:
            from cloudvault.tools import docker as dd

            self._client = dd.connect(timeout=30).client
        client = self._client
        for cid in job.handles:
            with contextlib.suppress(Exception):  # already gone is what we want
                client.kill(cid, signal="SIGTERM")
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline and any(_running(client, cid) for cid in job.handles):
            time.sleep(0.1)
        for p, cid in zip(job.plan.processes, job.handles, strict=False):
            with contextlib.suppress(Exception):
                if _running(client, cid):
                    client.kill(cid, signal="SIGKILL")
                client.wait(cid, timeout=30)
                job.codes[job.handles.index(cid)] = client.inspect_container(cid)["State"]["ExitCode"]
                _save_logs(client, cid, job.plan.run_dir / "logs" / p.name)
            with contextlib.suppress(Exception):
                client.remove_container(cid, force=True)

    def _restorable(self, plan: Plan):
        """The docker recipe that restores the image to run, when there is one (--image names one of its tags)."""
        recipe = _docker_recipe(plan)
        return recipe if recipe is not None and (not self.image or self.image in recipe.tags) else None

    def _restore(self, plan: Plan) -> None:
        """The recipe's image into the daemon: from the mirror's archive, else by digest from its registry."""
        from cloudvault import config
        from cloudvault.catalog.db import open_catalog
        from cloudvault.restore.docker import restore as restore_docker

        recipe = self._restorable(plan)
        if recipe is None:
            raise ContainerFailed(name="the run", image=self.image_ref(plan), detail="not in the daemon, no recipe")
        conn = open_catalog(config.catalog_path(self.catalog))
        try:
            source = "registry" if recipe.manifest_digest and not _archived(conn, recipe) else "archive"
            restore_docker.restore(conn, restore_docker.preflight(conn, restore_docker.Choices(recipe, source)))
        finally:
            conn.close()


def mounts_for(plan: Plan) -> dict[str, tuple[str, str]]:
    """host path -> (container path, ro|rw): the mirror read-only, the run folder read-write, and for the stand-in
    vault's own Python runtime read-only."""
    mounts = {str(plan.run_dir): (str(plan.run_dir), "rw")}
    if plan.mirror_root and os.path.isdir(plan.mirror_root):
        mounts[os.path.realpath(plan.mirror_root)] = (os.path.realpath(plan.mirror_root), "ro")
    if plan.standin:
        for path in dict.fromkeys([os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), _package_root(),
                                   "/usr"]):  # fmt: skip
            mounts.setdefault(path, (path, "ro"))
        for link in ("/lib", "/lib64"):  # merged /usr: the loader and libc are reached through these links
            if os.path.islink(link) and os.path.realpath(link).startswith("/usr/"):
                mounts.setdefault(os.path.realpath(link), (link, "ro"))
    return mounts


def _package_root() -> str:
    return str(Path(cloudvault.__file__).resolve().parents[1])


def _start(client, plan: Plan, p, image: str) -> str:
    """Create and start one process's container; its id."""
    import docker

    gpu = _uses_gpu(plan, p)
    binds = {src: {"bind": dst, "mode": mode} for src, (dst, mode) in mounts_for(plan).items()}
    # init: docker-init is PID 1 and passes SIGTERM on (the process itself as PID 1 would ignore it on cancel)
    host_config = client.create_host_config(
        binds=binds, network_mode="none", init=True, cpuset_cpus=",".join(map(str, p.cpu_cores)) if _cpuset(p)
        else None,
        device_requests=[docker.types.DeviceRequest(device_ids=[str(p.gpu)], capabilities=[["gpu"]])] if gpu else None,
    )  # fmt: skip
    # the device request gives the container only its GPU, as index 0: the host index would point nowhere
    env = {k: v for k, v in p.env.items() if not (gpu and k == "CUDA_VISIBLE_DEVICES")}
    if plan.standin:  # the package mounted is the one that runs, whether vault was installed or put on PYTHONPATH
        env.setdefault("PYTHONPATH", _package_root())
    try:
        labels = {"cloudvault.run": plan.run_dir.name, "cloudvault.process": p.name}
        created = client.create_container(image, command=p.argv, working_dir=p.cwd, environment=env, labels=labels,
                                          host_config=host_config, user=f"{os.getuid()}:{os.getgid()}")  # fmt: skip
        client.start(created["Id"])
    except docker.errors.APIError as exc:
        if "created" in locals():
            client.remove_container(created["Id"], force=True)
        raise ContainerFailed(name=p.name, image=image, detail=exc.explanation or str(exc)) from None
    return created["Id"]


def ran_for(state: dict) -> float | None:
    """Seconds from a container's StartedAt to its FinishedAt (dockerd's RFC 3339 times, in nanoseconds): the
    process's own time, not the wait's (a short process ends while later containers are still being started)."""
    from datetime import datetime

    def parse(stamp: str) -> datetime:
        head, _, frac = stamp.rstrip("Z").partition(".")
        return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00")

    try:
        return max(0.0, (parse(state["FinishedAt"]) - parse(state["StartedAt"])).total_seconds())
    except (KeyError, ValueError):
        return None


def _running(client, cid: str) -> bool:
    try:
        return client.inspect_container(cid)["State"]["Running"]
    except Exception:  # gone
        return False


def _save_logs(client, cid: str, stem: Path) -> None:
    for suffix, out, err in ((".out", True, False), (".err", False, True)):
        with open(f"{stem}{suffix}", "wb") as fh:
            fh.write(client.logs(cid, stdout=out, stderr=err))


def _uses_gpu(plan: Plan, p) -> bool:
    return not plan.standin and p.gpu is not None


def _cpuset(p) -> bool:
    """Pin only to cores this host has (the lab's 24g..24g+23 on a 2-core test machine would not start)."""
    from cloudvault.repro.plan import pinnable

    return pinnable(p.cpu_cores)


def _docker_recipe(plan: Plan):
    name = plan.recipe.section("environment").get("docker")
    if not name:
        return None
    from cloudvault.restore.docker.source import load_docker_recipe

    return load_docker_recipe(name)


def _archived(conn, recipe) -> bool:
    from cloudvault.restore.docker.source import archive_info

    try:
        archive_info(conn, recipe)
    except VaultError:
        return False
    return True


def _arch_check(plan: Plan, found: dict | None, recipe) -> Check:
    """The image's CUDA arch list (its config's env, else the docker recipe) against each GPU the plan uses."""
    fit = image_fit(plan, recipe, found)
    if fit is None:
        return Check("arch", True, "no GPU used")
    if not fit.archs:
        return Check("arch", True, "the image records no CUDA arch list; not checked")
    if line := fit.misfit_line("image"):
        return Check("arch", False, line)
    return Check("arch", True, f"arch list {fit.archs} ({fit.source}) fits GPUs {[g.index for g in fit.gpus]}")
