"""Mirrors behind URLs on real servers: a real sshd (sftp) and a local S3 server (moto), indexed and read by
ranges, as tests/cli/test_remote.py reads a memory:// mirror."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import fsspec
import pytest
from cli.test_remote import _late_member, _multiframe_archive, counted_reads  # noqa: F401 (a fixture)
from conftest import require


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, name: str, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    proc.kill()
    err = proc.stderr.read().decode()[-500:] if proc.stderr else ""
    pytest.fail(f"{name} did not start on port {port}: {err}")


@pytest.fixture
def sshd(tmp_path):
    """A real sshd on 127.0.0.1 accepting this user's fresh key (written to the test's temp HOME)."""
    sshd_bin = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
    if sshd_bin is None:
        require("sshd")
    require("ssh-keygen")
    if os.environ.get("CI") != "true":
        pytest.importorskip("paramiko")
    conf = tmp_path / "sshd"
    conf.mkdir()
    home_ssh = Path(os.environ["HOME"]) / ".ssh"
    home_ssh.mkdir(mode=0o700, exist_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(conf / "host_key")], check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home_ssh / "id_ed25519")], check=True)
    (conf / "authorized_keys").write_text((home_ssh / "id_ed25519.pub").read_text())
    os.chmod(conf / "authorized_keys", 0o600)
    port = _free_port()
    (conf / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {conf / 'host_key'}\nPidFile {conf / 'pid'}\n"
        f"AuthorizedKeysFile {conf / 'authorized_keys'}\nPasswordAuthentication no\nPermitRootLogin yes\n"
        "StrictModes no\nUsePAM no\nSubsystem sftp internal-sftp\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen([sshd_bin, "-D", "-e", "-f", str(conf / "sshd_config")], stderr=subprocess.PIPE)
    _wait_for_port(port, proc, "sshd")
    yield port
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.integration
def test_ssh_mirror_through_a_real_sshd(tmp_path, vault, sshd, counted_reads):  # noqa: F811
    archive, src = _multiframe_archive(tmp_path)
    mirror = tmp_path / "remote" / "Marvell_cloud"
    (mirror / "018_aicluster_breakdown_debugger/data").mkdir(parents=True)
    shutil.copy(archive, mirror / "018_aicluster_breakdown_debugger/data/a.tar.zst")
    (mirror / "README.md").write_text("# the lab's mirror\n")
    url = f"ssh://{getpass.getuser()}@127.0.0.1:{sshd}{mirror}"
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", "--json", url)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["archives_read"] == 1 and doc["members_indexed"] >= 8
    member, frame, frames = _late_member(db)
    assert frame >= frames - 2 >= 2  # in one of the last frames: reading from the start would cost the archive
    counted_reads["bytes"] = 0
    out = tmp_path / "out"
    assert vault("--catalog", db, "extract", "018", member, "-o", str(out)).code == 0
    name = member.rsplit("/", 1)[-1]
    assert (out / name).read_bytes() == (src / member).read_bytes()
    assert counted_reads["bytes"] < archive.stat().st_size / 2
    again = json.loads(vault("--catalog", db, "index", "--json", url).out)
    assert again["files_read"] == 0 and again["files_unchanged"] == 2


@pytest.fixture
def s3_server(monkeypatch):
    """A local S3-compatible server (moto), reached through s3fs with fsspec's environment configuration."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("s3fs")
        pytest.importorskip("moto.server")
    import boto3

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    _wait_for_port(port, proc, "moto server")
    for key, value in {
        "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
        "FSSPEC_S3_ENDPOINT_URL": endpoint,
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    # fsspec reads FSSPEC_* variables when it is imported, as a user's `vault` process does; this one is running
    monkeypatch.setattr(fsspec.config, "conf", {})
    fsspec.config.set_conf_env(fsspec.config.conf)
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="lab-backup")
    yield boto3.client("s3", endpoint_url=endpoint)
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.integration
def test_s3_mirror_through_a_local_s3_server(tmp_path, vault, s3_server, counted_reads):  # noqa: F811
    archive, src = _multiframe_archive(tmp_path)
    s3_server.upload_file(str(archive), "lab-backup", "Marvell_cloud/018_x/data/a.tar.zst")
    s3_server.put_object(Bucket="lab-backup", Key="Marvell_cloud/018_x/ENVIRONMENT.md", Body=b"# s3 copy\n")
    url = "s3://lab-backup/Marvell_cloud"
    db = str(tmp_path / "c.db")
    r = vault("--catalog", db, "index", "--json", url)
    assert r.code == 0, r.err
    assert json.loads(r.out)["members_indexed"] >= 8
    counted_reads["bytes"] = 0
    out = tmp_path / "out"
    assert vault("--catalog", db, "extract", "018", "dumps/last.json", "-o", str(out)).code == 0
    assert (out / "last.json").read_text() == '{"end": true}\n'
    assert counted_reads["bytes"] < archive.stat().st_size / 3
    again = json.loads(vault("--catalog", db, "index", "--json", url).out)
    assert again["files_read"] == 0
