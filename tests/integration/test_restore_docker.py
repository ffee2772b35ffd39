"""`vault restore docker` against a real dockerd and a real registry (htpasswd auth), as .ci/services/docker.sh
starts them: load from the archive and run the image, damaged archives and lying SHA256SUMS load nothing, tags
are never taken silently, pulls go by digest with the user's own login and are proven against the archive."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from cli.test_restore_docker import docker_mirror
from conftest import REPO, require

from cloudvault.demo import images

pytestmark = pytest.mark.docker
ROOT = REPO
NEO_TAG = "junhyeong0724/marvell-tandemspec:neo"


@pytest.fixture(scope="session")
def services() -> dict[str, str]:
    """VAULT_TEST_* of the running services (CI), else dockerd + registry started here by .ci/services/docker.sh."""
    if os.environ.get("VAULT_TEST_DOCKER_HOST"):
        yield {k: v for k, v in os.environ.items() if k.startswith("VAULT_TEST_")}
        return
    for tool in ("dockerd", "docker", "docker-registry", "htpasswd"):
        require(tool)
    if os.geteuid() != 0:
        pytest.skip("dockerd needs root here")
    folder = Path(tempfile.mkdtemp(prefix="vct", dir="/tmp"))  # short: unix socket paths end at 108 bytes
    script = f". {ROOT}/.ci/services/docker.sh && env"
    done = subprocess.run(["bash", "-c", script], env=os.environ | {"CI_SERVICES": str(folder)},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = dict(line.split("=", 1) for line in done.stdout.splitlines() if line.startswith("VAULT_TEST_"))
    yield found
    pids = [int(p.read_text()) for p in folder.glob("*.pid")]
    for pid in pids:
        os.kill(pid, 15)
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def daemon_held(host: str):
    """The test daemon is one for every pytest-xdist worker (CI starts one), and a test clears its images: each
    test that uses it holds it alone, through a lock file named after it, from before the clearing to its end
    (another worker's clearing, mid-test, removed a test's images and made it fail now and then)."""
    import fcntl

    lock = Path(tempfile.gettempdir()) / f"vault-test-docker-{hashlib.sha256(host.encode()).hexdigest()[:12]}.lock"
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


@pytest.fixture
def daemon(services, monkeypatch):
    """A docker-py client of the test daemon, with no image in it, held by this test alone; DOCKER_HOST points
    vault at it."""
    import docker

    host = services["VAULT_TEST_DOCKER_HOST"]
    monkeypatch.setenv("DOCKER_HOST", host)
    monkeypatch.setenv("DOCKER_CONFIG", str(Path(os.environ["HOME"]) / ".docker"))
    with daemon_held(host):
        client = docker.APIClient(base_url=host, version="auto", timeout=120)
        for image in client.images(all=True):
            client.remove_image(image["Id"], force=True)
        yield client


def neo_image(**kw) -> bytes:
    """The demo's neo image with the host's busybox-static as its root layer: these tests run what they restore."""
    return images.demo_image("neo", runnable=True, **kw)


def neo_archive(**kw) -> bytes:
    return images.compress(neo_image(**kw))


def config_digest(tar: bytes) -> str:
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        manifest = json.load(t.extractfile("manifest.json"))
        return "sha256:" + hashlib.sha256(t.extractfile(manifest[0]["Config"]).read()).hexdigest()


def load_into(client, tar: bytes) -> list:
    """docker load, to its end: docker-py hands back the answer as a lazy stream, and a daemon that is not read
    from may not have tagged the image yet when the test looks (the race that made a fault test flaky)."""
    return list(client.load_image(tar))


def image_ids(client) -> set[str]:
    return {i["Id"] for i in client.images(all=True)}


def run_in(client, image: str, *command: str) -> str:
    container = client.create_container(image, list(command), host_config=client.create_host_config(
        network_mode="none"))  # fmt: skip
    try:
        client.start(container)
        assert client.wait(container, timeout=60)["StatusCode"] == 0
        return client.logs(container).decode()
    finally:
        client.remove_container(container, force=True)


# -- from the archive ------------------------------------------------------------------------------------------------
def test_restore_from_archive_loads_an_image_that_runs_and_is_recorded(tmp_path, vault, daemon):
    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()})
    result = vault("--catalog", str(db), "restore", "docker", "neo", "--json")
    assert result.code == 0, result.err
    done = json.loads(result.out)["restored"]
    expected = config_digest(neo_image())
    assert done["image_id"] == expected == done["config_digest"] and done["layers"] == 2
    assert done["tags"] == [NEO_TAG] and done["bytes_out"] == len(neo_image())
    assert run_in(daemon, NEO_TAG, "busybox", "echo", "neo runs") == "neo runs\n"
    assert "TORCH_CUDA_ARCH_LIST=12.0" in run_in(daemon, NEO_TAG, "cat", "/opt/neo/BUILD.md")
    found = vault("--catalog", str(db), "search", "restored", "docker", "neo")
    assert found.code == 0 and expected in found.out
    shown = vault("--catalog", str(db), "show", "_docker")
    assert "restored docker neo -> " + expected in shown.out
    again = vault("--catalog", str(db), "restore", "docker", "neo")  # the same image again: no conflict
    assert again.code == 0 and "matches SHA256SUMS" in again.out


def test_single_frame_archive_with_a_flipped_byte_exits_5_and_loads_nothing(tmp_path, vault, daemon):
    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()})
    flip(tmp_path / "Marvell_cloud/_docker/images/neo.tar.zst", 0.5)
    result = vault("--catalog", str(db), "restore", "docker", "neo")
    assert result.code == 5, result.err
    assert image_ids(daemon) == set()


def test_multi_frame_archive_with_a_flipped_byte_is_cut_off_mid_stream(tmp_path, vault, daemon, services):
    """Only the frames of manifest.json and the config are read before loading; the damage is met while streaming."""
    tar = neo_image()
    cctx = __import__("zstandard").ZstdCompressor(level=3, write_checksum=True)
    frames = [cctx.compress(tar[i : i + (128 << 10)]) for i in range(0, len(tar), 128 << 10)]
    db = docker_mirror(tmp_path, vault, {"neo": b"".join(frames)})
    flip(tmp_path / "Marvell_cloud/_docker/images/neo.tar.zst", 0.5)
    result = vault("--catalog", str(db), "restore", "docker", "neo")
    assert result.code == 5 and "the daemon got a cut-off stream and loaded nothing" in result.err
    assert image_ids(daemon) == set()


def flip(path: Path, where: float) -> None:
    """Bit rot: one byte changed, size and mtime kept (so only the content can tell)."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[int(len(data) * where)] ^= 0x40
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_sha256sums_that_lie_cut_the_load_off_and_the_daemon_keeps_nothing(tmp_path, vault, daemon, services):
    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()}, sums={"neo": "ab" * 32})
    log = Path(services.get("VAULT_TEST_DOCKER_LOG", "/nonexistent"))
    seen = log.read_text().count("POST /v1.41/images/load") if log.exists() else 0
    result = vault("--catalog", str(db), "restore", "docker", "neo")
    assert result.code == 5 and "SHA256SUMS says abab" in result.err and "cut-off" in result.err
    assert image_ids(daemon) == set()
    if log.exists():  # the daemon was called, and answered nothing: the body never ended
        assert log.read_text().count("POST /v1.41/images/load") == seen + 1
    # the daemon spooled what it got into a docker-import-* folder, and drops it once the body is cut off
    spool = Path(services["VAULT_TEST_DOCKER_ROOT"]) / "tmp"
    deadline = time.monotonic() + 10
    while list(spool.glob("docker-import-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not list(spool.glob("docker-import-*"))
    failed = vault("--catalog", str(db), "search", "restored", "docker", "failed")
    assert failed.code == 0 and "neo: failed" in failed.out


def test_ctrl_c_while_streaming_loads_nothing_and_is_recorded(tmp_path, vault, daemon, monkeypatch):
    from cloudvault.errors import Interrupted
    from cloudvault.restore.docker.stream import TeeStream

    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()})
    calls = []
    real_take = TeeStream.take

    def take(self, **kw):
        calls.append(1)
        if len(calls) == 4:  # a few pieces went to the daemon, then SIGINT
            raise Interrupted()
        return real_take(self, **kw)

    monkeypatch.setattr(TeeStream, "take", take)
    result = vault("--catalog", str(db), "restore", "docker", "neo")
    assert result.code == 130 and image_ids(daemon) == set()
    found = vault("--catalog", str(db), "search", "restored", "docker", "neo")
    assert "neo: interrupted" in found.out


def test_an_image_the_daemon_loaded_differently_is_removed_unless_it_was_there_before(tmp_path, vault, daemon,
                                                                                       monkeypatch):  # fmt: skip
    """The check after loading (image id, layers): what this restore added goes; an image that was there stays."""
    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()})
    monkeypatch.setattr("cloudvault.restore.docker.restore._loaded_problem", lambda *a: "the daemon's layers differ")
    result = vault("--catalog", str(db), "restore", "docker", "neo")
    assert result.code == 5 and "the daemon's layers differ; removed what was loaded" in result.err
    assert image_ids(daemon) == set()
    load_into(daemon, neo_image())
    kept = vault("--catalog", str(db), "restore", "docker", "neo")
    assert kept.code == 5 and "kept the image that was there before" in kept.err
    assert image_ids(daemon) == {config_digest(neo_image())}


def test_a_tag_held_by_another_image_is_refused_then_moved_with_retag(tmp_path, vault, daemon):
    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()})
    other = images.demo_image("other", tag=NEO_TAG)
    load_into(daemon, other)
    assert config_digest(other) in image_ids(daemon)
    result = vault("--catalog", str(db), "restore", "docker", "neo")
    assert result.code == 6 and f"tag {NEO_TAG} is held by image {config_digest(other)[:19]}" in result.err
    assert daemon.inspect_image(NEO_TAG)["Id"] == config_digest(other)
    assert_failure_recorded(db, vault, f"tag {NEO_TAG} is held by image")
    moved = vault("--catalog", str(db), "restore", "docker", "neo", "--retag")
    assert moved.code == 0 and "moves from image" in moved.out
    assert daemon.inspect_image(NEO_TAG)["Id"] == config_digest(neo_image())


def test_an_sm120_image_is_not_loaded_on_a_9_0_gpu(tmp_path, vault, daemon, monkeypatch):
    from cli.test_restore_docker import H200, RTX_PRO_6000, fake_gpu

    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()})
    fake_gpu(monkeypatch, tmp_path / "h200", H200)
    refused = vault("--catalog", str(db), "restore", "docker", "neo")
    assert refused.code == 6 and "compute capability 9.0" in refused.err and "sm_120" in refused.err
    assert image_ids(daemon) == set()
    fake_gpu(monkeypatch, tmp_path / "rtx", RTX_PRO_6000)
    loaded = vault("--catalog", str(db), "restore", "docker", "neo")
    assert loaded.code == 0 and "fits" in loaded.out


def test_unread_config_of_a_big_single_frame_archive_is_checked_in_the_stream(tmp_path, vault, daemon, monkeypatch):
    """When reading manifest.json first would cost a full decode, the GPU and tag checks run on the streamed
    config, before docker gets manifest.json: refused means nothing loaded."""
    from cli.test_restore_docker import H200, fake_gpu

    monkeypatch.setattr("cloudvault.restore.docker.restore.READ_BUDGET", 0)
    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()})
    recipes = tmp_path / "recipes" / "docker"
    recipes.mkdir(parents=True)
    (recipes / "neo-bare.toml").write_text('entry = "_docker"\narchive = "images/neo.tar.zst"\ntags = []\n')
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "recipes"))
    fake_gpu(monkeypatch, tmp_path / "h200", H200)
    dry = vault("--catalog", str(db), "restore", "docker", "neo-bare", "--dry-run")
    assert dry.code == 0 and "checked as it streams instead" in dry.out and "cannot tell" in dry.out
    refused = vault("--catalog", str(db), "restore", "docker", "neo-bare")
    assert refused.code == 6 and "TORCH_CUDA_ARCH_LIST=12.0 in the image config" in refused.err
    assert image_ids(daemon) == set()
    other = images.demo_image("other", tag=NEO_TAG)
    load_into(daemon, other)
    held = vault("--catalog", str(db), "restore", "docker", "neo-bare", "--ignore-gpu")
    assert held.code == 6 and f"tag {NEO_TAG} is held by image" in held.err
    assert image_ids(daemon) == {config_digest(other)}


def test_daemon_down_exits_6_naming_the_socket(tmp_path, vault, daemon, monkeypatch):
    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()})
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/stopped.sock")
    result = vault("--catalog", str(db), "restore", "docker", "neo")
    assert result.code == 6 and f"unix://{tmp_path}/stopped.sock" in result.err and "DOCKER_HOST" in result.err
    assert_failure_recorded(db, vault, "stopped.sock")


def assert_failure_recorded(db: Path, vault, error: str) -> None:
    """A refused restore is a failed restores row (its error and exit code), as a failed env restore is, and
    `vault show` lists it with its error."""
    import sqlite3

    rows = sqlite3.connect(db).execute("SELECT kind, name, status, detail, target FROM restores").fetchall()
    assert [(kind, name, status) for kind, name, status, _, _ in rows] == [("docker", "neo", "failed")]
    detail = json.loads(rows[0][3])
    assert error in detail["error"] and detail["exit_code"] == 6 and rows[0][4] == ""
    shown = vault("--catalog", str(db), "show", "_docker")
    assert "restore  docker neo: failed (" in shown.out and error in shown.out


@pytest.fixture
def small_daemon(services, tmp_path, monkeypatch):
    """A second dockerd whose data root is a 6 MiB tmpfs: room for the demo image's spool, not for it unpacked."""
    import docker

    folder = Path(tempfile.mkdtemp(prefix="vcs", dir="/tmp"))
    root = folder / "data"
    root.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(root)], capture_output=True)
    if mounted.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot mount a tmpfs: {mounted.stderr!r}")
        pytest.skip("cannot mount a tmpfs here")
    sock = f"unix://{folder}/sock"
    proc = subprocess.Popen(["dockerd", "--iptables=false", "--bridge=none", "--data-root", str(root), "--exec-root",
                             str(folder / "x"), "--pidfile", str(folder / "pid"), "-H", sock, "--containerd-namespace",
                             "vault-small"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client = docker.APIClient(base_url=sock, version="auto", timeout=60)
                break
            except docker.errors.DockerException:
                assert time.monotonic() < deadline, "the small dockerd did not answer in 30 s"
                time.sleep(0.3)
        monkeypatch.setenv("DOCKER_HOST", sock)
        yield client
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        subprocess.run(["umount", str(root)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_data_root_too_small_exits_6_before_loading(tmp_path, vault, small_daemon, monkeypatch):
    db = docker_mirror(tmp_path, vault, {"big": images.compress(big_image())})
    big_recipe(tmp_path, monkeypatch)
    root = small_daemon.info()["DockerRootDir"]
    result = vault("--catalog", str(db), "restore", "docker", "big")
    assert result.code == 6 and f"the docker data root {root} has" in result.err and "needs about" in result.err
    assert small_daemon.images(all=True) == []


def test_the_daemon_running_out_of_space_mid_load_is_one_line_and_keeps_nothing(tmp_path, vault, small_daemon,
                                                                               monkeypatch):  # fmt: skip
    """With the space check fooled, docker's own "no space left" (an errorDetail in its 200 answer) is exit 6."""
    db = docker_mirror(tmp_path, vault, {"big": images.compress(big_image())})
    big_recipe(tmp_path, monkeypatch)
    monkeypatch.setattr("cloudvault.restore.docker.restore.LOAD_FACTOR", 0)
    result = vault("--catalog", str(db), "restore", "docker", "big")
    assert result.code == 6 and "no space left on device" in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1
    assert small_daemon.images(all=True) == []


def big_recipe(tmp_path: Path, monkeypatch) -> None:
    recipes = tmp_path / "recipes" / "docker"
    recipes.mkdir(parents=True)
    (recipes / "big.toml").write_text('entry = "_docker"\narchive = "images/big.tar.zst"\ntags = []\n')
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "recipes"))


def big_image() -> bytes:
    """An image of 8 MiB of incompressible bytes: more than the small data root holds."""
    layers = [images.tar_bytes([("blob.bin", os.urandom(8 << 20), None)])]
    return images.save_archive("marvell/big:1", layers, images.image_config(layers, images.BUILD_ENV, {}))


def test_a_real_docker_save_archive_restores_too(tmp_path, vault, daemon, services, monkeypatch):
    """docker import of a busybox rootfs, `docker save` by the daemon itself (its own layout), zstd: restored."""
    busybox = require("busybox")
    rootfs = tmp_path / "rootfs" / "bin"
    rootfs.mkdir(parents=True)
    shutil.copy(busybox, rootfs / "busybox")
    (rootfs / "sh").symlink_to("busybox")
    docker_cli = ["docker", "-H", services["VAULT_TEST_DOCKER_HOST"]]
    tar = subprocess.run(["tar", "-C", str(rootfs.parent), "-c", "."], capture_output=True, check=True).stdout
    subprocess.run([*docker_cli, "import", "-c", "ENV TORCH_CUDA_ARCH_LIST=12.0", "-", "marvell/saved:1"],
                   input=tar, check=True, capture_output=True)  # fmt: skip
    saved = subprocess.run([*docker_cli, "save", "marvell/saved:1"], capture_output=True, check=True).stdout
    daemon.remove_image("marvell/saved:1", force=True)
    db = docker_mirror(tmp_path, vault, {"saved": images.compress(saved)})
    recipes = tmp_path / "recipes" / "docker"
    recipes.mkdir(parents=True)
    (recipes / "saved.toml").write_text('entry = "_docker"\narchive = "images/saved.tar.zst"\ntags = []\n')
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "recipes"))
    result = vault("--catalog", str(db), "restore", "docker", "saved")
    assert result.code == 0, result.err
    assert run_in(daemon, "marvell/saved:1", "busybox", "echo", "saved runs") == "saved runs\n"


# -- from the registry -----------------------------------------------------------------------------------------------
def push(services, daemon, tmp_path: Path, tar: bytes, name: str) -> str:
    """Load tar, push it to the test registry as marvell-tandemspec:name with a login; its manifest digest."""
    registry = services["VAULT_TEST_REGISTRY"]
    config = tmp_path / "pusher"
    docker_cli = ["docker", "--config", str(config), "-H", services["VAULT_TEST_DOCKER_HOST"]]
    login(services, docker_cli)
    load_into(daemon, tar)
    ref = f"{registry}/marvell-tandemspec:{name}"
    daemon.tag(config_digest(tar), f"{registry}/marvell-tandemspec", name, force=True)
    out = subprocess.run([*docker_cli, "push", ref], capture_output=True, text=True, check=True).stdout
    digest = next(w for w in out.split() if w.startswith("sha256:"))
    daemon.remove_image(config_digest(tar), force=True)
    return digest


def login(services, docker_cli: list[str]) -> None:
    subprocess.run([*docker_cli, "login", services["VAULT_TEST_REGISTRY"], "-u", services["VAULT_TEST_REGISTRY_USER"],
                    "--password-stdin"], input=services["VAULT_TEST_REGISTRY_PASSWORD"], text=True, check=True,
                   capture_output=True)  # fmt: skip


def registry_recipe(tmp_path: Path, monkeypatch, services, digest: str) -> None:
    folder = tmp_path / "recipes" / "docker"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "neo-hub.toml").write_text(
        'entry = "_docker"\narchive = "images/neo.tar.zst"\ntags = ["marvell/neo:restored"]\n'
        f'[registry]\nrepository = "{services["VAULT_TEST_REGISTRY"]}/marvell-tandemspec"\n'
        f'manifest_digest = "{digest}"\n'
    )
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "recipes"))


def test_pull_by_digest_with_the_users_login_is_proven_against_the_archive(tmp_path, vault, daemon, services,
                                                                          monkeypatch):  # fmt: skip
    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()})
    digest = push(services, daemon, tmp_path, neo_image(), "neo")
    registry_recipe(tmp_path, monkeypatch, services, digest)
    user_config = tmp_path / "user-docker"
    monkeypatch.setenv("DOCKER_CONFIG", str(user_config))
    registry = services["VAULT_TEST_REGISTRY"]
    dry = vault("--catalog", str(db), "restore", "docker", "neo-hub", "--from", "registry", "--dry-run")
    assert dry.code == 0 and f"no docker login for {registry}" in dry.out
    assert f"pull     {registry}/marvell-tandemspec@{digest}" in dry.out
    anonymous = vault("--catalog", str(db), "restore", "docker", "neo-hub", "--from", "registry")
    assert anonymous.code == 6 and f"docker login {services['VAULT_TEST_REGISTRY']}" in anonymous.err
    assert image_ids(daemon) == set()
    login(services, ["docker", "--config", str(user_config), "-H", services["VAULT_TEST_DOCKER_HOST"]])
    before = (user_config / "config.json").read_bytes()
    dry = vault("--catalog", str(db), "restore", "docker", "neo-hub", "--from", "registry", "--dry-run")
    assert dry.code == 0 and "no docker login" not in dry.out
    result = vault("--catalog", str(db), "restore", "docker", "neo-hub", "--from", "registry", "--json")
    assert result.code == 0, result.err
    done = json.loads(result.out)["restored"]
    assert done["image_id"] == config_digest(neo_image()) and done["manifest_digest"] == digest
    assert f"{registry}/marvell-tandemspec@{digest}" in done["repo_digests"]  # what the daemon says it came as
    assert "marvell/neo:restored" in done["tags"]
    assert (user_config / "config.json").read_bytes() == before  # vault wrote no credentials
    password = services["VAULT_TEST_REGISTRY_PASSWORD"]
    conn = __import__("sqlite3").connect(db)
    assert not any(password in str(row) for row in conn.execute("SELECT * FROM restores"))
    assert run_in(daemon, "marvell/neo:restored", "busybox", "echo", "pulled") == "pulled\n"


def test_registry_image_that_is_not_the_archives_exits_5_and_is_removed(tmp_path, vault, daemon, services,
                                                                        monkeypatch):  # fmt: skip
    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()})
    impostor = neo_image(labels={"org.marvell.note": "rebuilt, not the backup's"})
    digest = push(services, daemon, tmp_path, impostor, "neo-rebuilt")
    registry_recipe(tmp_path, monkeypatch, services, digest)
    user_config = tmp_path / "user-docker"
    monkeypatch.setenv("DOCKER_CONFIG", str(user_config))
    login(services, ["docker", "--config", str(user_config), "-H", services["VAULT_TEST_DOCKER_HOST"]])
    result = vault("--catalog", str(db), "restore", "docker", "neo-hub", "--from", "registry")
    assert result.code == 5 and config_digest(impostor) in result.err and "removed the pulled image" in result.err
    assert image_ids(daemon) == set()


def test_pull_needs_a_digest_never_a_floating_tag(tmp_path, vault, daemon, services, monkeypatch):
    db = docker_mirror(tmp_path, vault, {"neo": neo_archive()})
    result = vault("--catalog", str(db), "restore", "docker", "neo", "--from", "registry")
    assert result.code == 2 and "--digest sha256:" in result.err
