"""restore docker: what docker loads is exactly what vault checked. A second, linked or non-normalised member named
manifest.json, index.json, repositories or a blob is damage (exit 5, nothing loaded); and the daemon's images and
tags are compared before and after a load, so whatever moved without proof is undone and reported."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest
from cli.test_restore_docker import docker_mirror
from integration.test_restore_docker import NEO_TAG, daemon, image_ids, load_into, services  # noqa: F401 (fixtures)

from cloudvault.demo import images
from cloudvault.restore.docker.errors import ArchiveDamaged
from cloudvault.restore.docker.stream import VerifiedBody

EVIL_TAG = "victim/app:latest"


def _members(tar: bytes) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        return [(m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()]


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for info, data in members:
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), 1_700_000_000
    return info, data


def _link(name: str, target: str, kind=tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def _evil_manifest(tar: bytes) -> bytes:
    (item,) = json.loads(dict((m.name, d) for m, d in _members(tar))["manifest.json"])
    return json.dumps([{**item, "RepoTags": [EVIL_TAG]}]).encode()


def hostile(kind: str) -> bytes:
    """The neo image's docker save tar with one hostile member added where docker would read it."""
    tar = images.demo_image("neo")
    members = _members(tar)
    names = [m.name for m, _ in members]
    layer = next(n for n in names if n.startswith("blobs/sha256/") and len(n) > 20)
    evil = _evil_manifest(tar)
    added = {
        "nothing": [],
        "second manifest.json": [_file("manifest.json", evil)],
        "manifest.json through x/../": [_file("x/../manifest.json", evil)],
        "manifest.json as ./ and x/../": [_file("./blobs/../manifest.json", evil)],
        "symlinked manifest.json": [_file("evil.json", evil), _link("manifest.json", "evil.json")],
        "hardlinked index.json": [_link("index.json", "evil.json", tarfile.LNKTYPE)],
        "second repositories": [_file("repositories", json.dumps({"victim/app": {"latest": "0" * 64}}).encode())],
        "symlinked blob": [_link(layer, names[2])],
        "blob through a climbing name": [_file(f"blobs/x/../../{layer}", b"x")],
    }[kind]
    return _tar(members + added)


KINDS = ["second manifest.json", "manifest.json through x/../", "manifest.json as ./ and x/../",
         "symlinked manifest.json", "hardlinked index.json", "second repositories", "symlinked blob",
         "blob through a climbing name"]  # fmt: skip


def _drain(data: bytes) -> tuple[bytes, Exception | None]:
    body = VerifiedBody(lambda: io.BytesIO(data), label="neo.tar.zst", expected_sha256=hashlib.sha256(data).hexdigest(),
                        sums_label="SHA256SUMS")  # fmt: skip
    sent = []
    try:
        for piece in body:
            sent.append(piece)
    except Exception as exc:  # what the daemon sees: the body stops here
        return b"".join(sent), exc
    return b"".join(sent), None


def test_the_archive_without_a_hostile_member_streams_whole():
    tar = hostile("nothing")
    sent, error = _drain(images.compress(tar))
    assert error is None and sent == tar


@pytest.mark.parametrize("kind", KINDS)
def test_a_second_linked_or_unnormalised_metadata_member_is_damage_and_docker_gets_no_manifest(kind, tally):
    tally("hostile_input")
    sent, error = _drain(images.compress(hostile(kind)))
    tally("write_outside", int(error is None))  # a full stream: docker would have loaded what vault did not check
    assert isinstance(error, ArchiveDamaged) and error.exit_code == 5, (kind, error)
    assert b"manifest.json" not in sent and b"index.json" not in sent, kind


@pytest.mark.docker
def test_a_second_manifest_with_another_tag_loads_nothing_into_the_real_daemon(tmp_path, vault, daemon, tally):  # noqa: F811
    db = docker_mirror(tmp_path, vault, {"neo": images.compress(hostile("second manifest.json"))})
    tally("hostile_input")
    r = vault("--catalog", str(db), "restore", "docker", "neo")
    assert r.code == 5 and "duplicate" in r.err and "loaded nothing" in r.err, r.err
    found = image_ids(daemon)
    tally("write_outside", len(found))
    assert found == set()


@pytest.mark.docker
def test_an_image_or_tag_docker_moved_without_proof_is_undone_and_reported(tmp_path, vault, daemon, monkeypatch,  # noqa: F811
                                                                           tally):  # fmt: skip
    """Should docker load more than the stream proved (a layout vault does not know), the daemon's images and tags
    are compared before and after: the extra image goes, the moved tag goes back to the image that held it."""
    from cloudvault.tools import docker as dd

    victim = images.demo_image("victim", tag=EVIL_TAG)
    load_into(daemon, victim)
    before = {i["Id"]: sorted(i["RepoTags"] or []) for i in daemon.images()}
    db = docker_mirror(tmp_path, vault, {"neo": images.compress(images.demo_image("neo"))})
    real_load = dd.load

    def load_and_more(d, name, body):  # docker also took in an image (and a tag) that vault never checked
        lines = real_load(d, name, body)
        load_into(daemon, images.demo_image("extra", tag=EVIL_TAG))
        return lines

    monkeypatch.setattr(dd, "load", load_and_more)
    tally("hostile_input")
    r = vault("--catalog", str(db), "restore", "docker", "neo")
    after = {i["Id"]: sorted(i["RepoTags"] or []) for i in daemon.images()}
    tally("write_outside", len(set(after) - set(before)))
    assert r.code == 5 and "not proven" in r.err and EVIL_TAG in r.err, r.err
    assert after == before
