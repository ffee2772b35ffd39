"""`vault restore docker ... --json`: --list, the checks (--check-gpu, --dry-run) and a restore, each document the
typed result's to_json(), documented field by field in docs/commands/restore-docker.md (a real run is the
snapshot). The restore runs here against an in-memory daemon that loads what the verified stream hands it (the
real dockerd runs in tests/integration/test_restore_docker.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import sqlite3
import tarfile

import pytest

from cli.test_restore_docker import H200, RTX_PRO_6000, docker_mirror, fake_gpu
from cloudvault.demo import images
from tests.cli.json_shapes import check


class MemoryDaemon:
    """The part of docker-py's APIClient vault uses, over images held in memory: a load reads the tar it is given
    (manifest.json, the config) as dockerd would, so the image is whatever the verified stream let through."""

    def __init__(self) -> None:
        self.images_by_id: dict[str, dict] = {}
        self.timeout = 60

    def info(self) -> dict:
        return {"ServerVersion": "memory", "DockerRootDir": "", "DriverStatus": []}

    def load_image(self, body):
        data = b"".join(body)
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            manifest = json.load(t.extractfile("manifest.json"))[0]
            config_bytes = t.extractfile(manifest["Config"]).read()
        image_id = "sha256:" + hashlib.sha256(config_bytes).hexdigest()
        layers = json.loads(config_bytes)["rootfs"]["diff_ids"]
        self.images_by_id[image_id] = {"Id": image_id, "RepoTags": list(manifest.get("RepoTags") or ()),
                                       "RootFS": {"Layers": layers}, "RepoDigests": []}  # fmt: skip
        return iter([{"stream": f"Loaded image ID: {image_id}\n"}])

    def inspect_image(self, ref: str) -> dict:
        import docker

        for found in self.images_by_id.values():
            if ref == found["Id"] or ref in found["RepoTags"]:
                return found
        raise docker.errors.ImageNotFound(ref)

    def images(self, all: bool = False) -> list[dict]:
        return list(self.images_by_id.values())

    def tag(self, image_id: str, repository: str, tag: str, force: bool = False) -> None:
        ref = f"{repository}:{tag}"
        for found in self.images_by_id.values():
            if ref in found["RepoTags"]:
                found["RepoTags"].remove(ref)
        self.images_by_id[image_id]["RepoTags"].append(ref)

    def remove_image(self, ref: str, force: bool = False, noprune: bool = False) -> None:
        self.images_by_id.pop(self.inspect_image(ref)["Id"])


@pytest.fixture
def memory_daemon(monkeypatch):
    from cloudvault.tools import docker as dd

    client = MemoryDaemon()
    daemon = dd.Daemon(client, "unix:///memory.sock", "memory", "", False)
    monkeypatch.setattr(dd, "connect", lambda timeout=60: daemon)
    return client


def test_list_json_is_the_documented_shape(demo_catalog, vault):
    result = vault("--catalog", str(demo_catalog), "restore", "docker", "--list", "--json")
    assert result.code == 0, result.err
    check(json.loads(result.out), "restore-docker.md", "--list")


def test_check_gpu_and_dry_run_json_are_the_documented_shape(demo_catalog, vault, tmp_path, monkeypatch,
                                                             memory_daemon):  # fmt: skip
    fake_gpu(monkeypatch, tmp_path / "bin", RTX_PRO_6000)
    checked = vault("--catalog", str(demo_catalog), "restore", "docker", "neo", "--check-gpu", "--json")
    assert checked.code == 0, checked.err
    check(json.loads(checked.out), "restore-docker.md", "--dry-run")
    planned = vault("--catalog", str(demo_catalog), "restore", "docker", "neo", "--dry-run", "--json")
    assert planned.code == 0, planned.err
    doc = json.loads(planned.out)
    check(doc, "restore-docker.md", "--dry-run")
    assert doc["daemon"]["host"] == "unix:///memory.sock" and doc["tags"] == {images_tag("neo"): None}
    fake_gpu(monkeypatch, tmp_path / "bin", H200)
    refused = vault("--catalog", str(demo_catalog), "restore", "docker", "neo", "--dry-run", "--json")
    assert refused.code == 6
    check(json.loads(refused.out), "restore-docker.md", "--dry-run")


def images_tag(name: str) -> str:
    return f"junhyeong0724/marvell-tandemspec:{name}"


def test_a_restore_loads_into_the_daemon_and_its_json_is_the_documented_shape(tmp_path, vault, monkeypatch,
                                                                              memory_daemon):  # fmt: skip
    db = docker_mirror(tmp_path, vault, {"neo": images.compress(images.demo_image("neo"))})
    fake_gpu(monkeypatch, tmp_path / "bin", RTX_PRO_6000)
    result = vault("--catalog", str(db), "restore", "docker", "neo", "--json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    check(doc, "restore-docker.md", "restore")
    (image,) = memory_daemon.images_by_id.values()
    assert doc["restored"]["image_id"] == image["Id"] and doc["restored"]["tags"] == [images_tag("neo")]
    stored = sqlite3.connect(db).execute("SELECT detail FROM restores WHERE status = 'ok'").fetchall()
    assert [json.loads(d) for (d,) in stored] == [doc["restored"]]
    memory_daemon.images_by_id.clear()
    shown = vault("--catalog", str(db), "restore", "docker", "neo")
    assert shown.code == 0, shown.err
    assert shown.out.splitlines()[0] == f"neo: loaded {image['Id']}"
    assert "layers match their diff_ids" in shown.out and "recorded in the catalog" in shown.out


def test_the_operations_hand_the_cli_frozen_typed_results():
    from cloudvault.restore.docker import results

    for cls in (results.ImageListed, results.ImageList, results.ImageChecked, results.DaemonSeen,
                results.ImageRestored, results.RestoreDone):  # fmt: skip
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
