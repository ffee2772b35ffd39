"""The dockerd client, through docker-py: connect, look (space, tags, images), load, pull, tag, remove.

Everything in vault that talks to dockerd goes through here (restore docker, the repro docker executor), so the
rest can be tested without one. Registry credentials are whatever the user's docker config or credential helper
holds; docker-py reads them at pull time and vault never writes or prints them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass

from cloudvault.errors import EnvironmentProblem, IntegrityError, NotFound


class DaemonUnreachable(EnvironmentProblem):
    """cannot reach the docker daemon at {host} ({detail}); start dockerd, or point DOCKER_HOST at a running one"""


class LoadFailed(IntegrityError):
    """docker refused {name}: {detail}; nothing of it was kept"""


class LoadEnvironmentFailed(EnvironmentProblem):
    """docker could not load {name}: {detail}"""


class RegistryLoginNeeded(EnvironmentProblem):
    """{registry} refused the pull of {ref} ({detail}); log in with `docker login {registry}`: vault uses your own docker login at run time and never stores credentials"""  # noqa: E501 (a message is one line)


class RegistryImageMissing(NotFound):
    """{registry} has no {ref} ({detail}); check the recipe's registry digest or pass --digest"""


class RegistryFailed(EnvironmentProblem):
    """pulling {ref} failed: {detail}"""

DEFAULT_HOST = "unix:///var/run/docker.sock"
LOGIN_WORDS = ("unauthorized", "authentication required", "no basic auth credentials", "denied", "401")
MISSING_WORDS = ("manifest unknown", "not found", "does not exist")
ENVIRONMENT_WORDS = ("no space left", "read-only file system", "permission denied", "too many open files")


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_HOST


@dataclass(frozen=True)
class Daemon:
    """A daemon that answered: its client, where it is, its data root and image store."""

    client: object  # docker.APIClient
    host: str
    version: str
    root_dir: str
    containerd_store: bool

    @property
    def local(self) -> bool:
        return self.host.startswith("unix://")


def _reason(exc: BaseException) -> str:
    """The innermost cause of a connection failure, in a few words."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__
    text = str(exc) or type(exc).__name__
    for known in ("No such file or directory", "Connection refused", "Permission denied", "timed out"):
        if known.lower() in text.lower():
            return known.lower()
    return text[:160]


def connect(timeout: float = 60) -> Daemon:
    """The daemon DOCKER_HOST (or the default socket) names; DaemonUnreachable (exit 6) if it does not answer."""
    import requests

    import docker

    host = docker_host()
    try:
        client = docker.APIClient(version="auto", timeout=timeout, **docker.utils.kwargs_from_env())
        info = client.info()
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        raise DaemonUnreachable(host=host, detail=_reason(exc)) from None
    drivers = " ".join(str(v) for pair in info.get("DriverStatus") or () for v in pair)
    return Daemon(client, host, info.get("ServerVersion", "?"), info.get("DockerRootDir", ""),
                  "io.containerd.snapshotter" in drivers)  # fmt: skip


def daemon_reachable(timeout: float = 3) -> bool:
    try:
        connect(timeout)
    except DaemonUnreachable:
        return False
    return True


def free_space(daemon: Daemon) -> int | None:
    """Bytes free in the daemon's data root, when it is on this machine; None when that cannot be seen."""
    if not daemon.local or not daemon.root_dir or not os.path.isdir(daemon.root_dir):
        return None
    st = os.statvfs(daemon.root_dir)
    return st.f_bavail * st.f_frsize


def image(daemon: Daemon, ref: str) -> dict | None:
    """docker inspect of an image by id, tag or repo@digest; None when there is none."""
    import docker

    try:
        return daemon.client.inspect_image(ref)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        if exc.status_code in (400, 404):  # an id that is not a valid reference is simply not there
            return None
        raise


def tag_holders(daemon: Daemon, tags: Iterable[str]) -> dict[str, str | None]:
    """Each tag -> the id of the image that holds it now, or None."""
    holders = {}
    for tag in tags:
        found = image(daemon, tag)
        holders[tag] = found["Id"] if found else None
    return holders


def inventory(daemon: Daemon) -> dict[str, str]:
    """Every tag in the daemon -> the id of the image holding it, untagged images as their id -> id."""
    held = {}
    for found in daemon.client.images(all=True):
        tags = [t for t in found.get("RepoTags") or () if t != "<none>:<none>"]
        held.update({tag: found["Id"] for tag in tags} if tags else {found["Id"]: found["Id"]})
    return held


def untag(daemon: Daemon, ref: str) -> None:
    """Take one tag away (the image stays while another tag or a container holds it)."""
    import docker

    with contextlib.suppress(docker.errors.NotFound):
        daemon.client.remove_image(ref, noprune=True)


def load(daemon: Daemon, name: str, body: Iterable[bytes]) -> list[str]:
    """POST the body to /images/load; the daemon's lines ('Loaded image: ...'). Errors the daemon reports
    inside its 200 stream (`errorDetail`) become one line: LoadFailed (5), or LoadEnvironmentFailed (6)."""
    import requests

    import docker

    lines = []
    try:
        for item in daemon.client.load_image(body):
            message = _stream_error(item)
            if message:
                raise _load_error(name, message)
            if item.get("stream", "").strip():
                lines.append(item["stream"].strip())
    except docker.errors.APIError as exc:
        raise _load_error(name, exc.explanation or str(exc)) from None
    except requests.RequestException as exc:
        raise LoadEnvironmentFailed(name=name, detail=f"the daemon closed the connection ({_reason(exc)})") from None
    return lines


def _stream_error(item: dict) -> str | None:
    if "errorDetail" in item:
        return (item["errorDetail"] or {}).get("message") or item.get("error") or "unknown error"
    if "error" in item:
        return str(item["error"])
    if set(item) == {"message"}:  # an HTTP error body, which docker-py hands over as a stream item
        return str(item["message"])
    return None


def _load_error(name: str, message: str) -> Exception:
    message = " ".join(message.split())
    if any(word in message.lower() for word in ENVIRONMENT_WORDS):
        return LoadEnvironmentFailed(name=name, detail=message)
    return LoadFailed(name=name, detail=message)


def registry_of(repository: str) -> str:
    """'127.0.0.1:5000/x/y' -> '127.0.0.1:5000'; 'junhyeong0724/x' -> 'docker.io' (docker's own rule)."""
    first = repository.split("/", 1)[0]
    return first if "/" in repository and ("." in first or ":" in first or first == "localhost") else "docker.io"


def has_login(registry: str) -> bool:
    """Whether the user's docker config names a login (or credential helper) for registry; nothing is read out."""
    from docker import auth

    try:
        config = auth.load_config()
    except Exception:  # an unreadable config is the pull's to report
        return False
    helpers = config.get_credential_store(registry) if hasattr(config, "get_credential_store") else None
    known = {auth.resolve_index_name(k) for k in config.auths}
    return bool(helpers) or auth.resolve_index_name(registry) in known


def pull(daemon: Daemon, repository: str, digest: str, progress=None) -> None:
    """docker pull repository@digest with the user's own login; login, missing and other failures are one line.
    progress (cloudvault.progress.Progress): the bytes downloaded of the layers announced so far."""
    import docker

    ref = f"{repository}@{digest}"
    registry = registry_of(repository)
    counter, shown = PullProgress(), (0, 0)  # (done, total) as the bar last showed them
    try:
        for item in daemon.client.pull(repository, tag=digest, stream=True, decode=True):
            message = _stream_error(item)
            if message:
                raise _pull_error(registry, ref, message)
            if progress is not None:
                shown = _show_pull(progress, counter.feed(item), shown, item.get("id"))
    except docker.errors.APIError as exc:
        raise _pull_error(registry, ref, exc.explanation or str(exc)) from None
    finally:
        if progress is not None:
            progress.finish()


class PullProgress:
    """Bytes downloaded of the layers a pull has announced, from dockerd's progress events (a layer's total is
    known once it starts downloading; one already present counts as done)."""

    def __init__(self) -> None:
        self.layers: dict[str, tuple[int, int]] = {}  # layer id -> (bytes done, total)

    def feed(self, item: dict) -> tuple[int, int]:
        """(bytes done, bytes announced) after this event."""
        layer, status, detail = item.get("id"), item.get("status", ""), item.get("progressDetail") or {}
        if layer and status == "Downloading" and detail.get("total"):
            self.layers[layer] = (int(detail.get("current", 0)), int(detail["total"]))
        elif layer in self.layers and status in ("Download complete", "Verifying Checksum", "Pull complete"):
            self.layers[layer] = (self.layers[layer][1], self.layers[layer][1])
        return sum(d for d, _ in self.layers.values()), sum(t for _, t in self.layers.values())


def _show_pull(progress, now: tuple[int, int], shown: tuple[int, int], layer: str | None) -> tuple[int, int]:
    done, total = now
    if total != shown[1]:  # a new layer announced: the bar's total grows (start() sets it and counts from 0)
        progress.start(total, 0)
        shown = (0, total)
    progress.advance(done - shown[0])
    if layer:
        progress.current(layer)
    return (done, total)


def _pull_error(registry: str, ref: str, message: str) -> Exception:
    message = " ".join(message.split())
    lower = message.lower()
    if any(word in lower for word in LOGIN_WORDS):
        return RegistryLoginNeeded(registry=registry, ref=ref, detail=message)
    if any(word in lower for word in MISSING_WORDS):
        return RegistryImageMissing(registry=registry, ref=ref, detail=message)
    return RegistryFailed(ref=ref, detail=message)


def remove(daemon: Daemon, image_id: str) -> None:
    """Remove an image vault itself just loaded or pulled (with all its tags)."""
    import docker

    with contextlib.suppress(docker.errors.NotFound):
        daemon.client.remove_image(image_id, force=True)


def tag(daemon: Daemon, image_id: str, ref: str) -> None:
    repository, _, version = ref.rpartition(":")
    if "/" in version or not repository:  # 'host:5000/name' has no tag: docker's default applies
        repository, version = ref, "latest"
    daemon.client.tag(image_id, repository, version, force=True)
