"""`vault restore docker` without a daemon: recipes, --list, the GPU check, and the verified stream's cut-off."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudvault.demo import images
from cloudvault.restore.docker import oci
from cloudvault.restore.docker.errors import ArchiveDamaged, ArchiveHashMismatch
from cloudvault.restore.docker.stream import VerifiedBody

H200 = "0, NVIDIA H200, 9.0, 0 MiB, 143771 MiB"
RTX_PRO_6000 = "0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0, 3 MiB, 97887 MiB"


@pytest.fixture
def no_daemon(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")


def fake_gpu(monkeypatch, folder, line: str | None) -> None:
    """A fake nvidia-smi on PATH printing line (None: no nvidia-smi at all)."""
    folder.mkdir(exist_ok=True)
    if line is not None:
        smi = folder / "nvidia-smi"
        smi.write_text(f"#!/bin/sh\necho '{line}'\n")
        smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}/usr/bin:/bin")


def docker_mirror(tmp_path: Path, vault, archives: dict[str, bytes], sums: dict[str, str] | None = None) -> Path:
    """A mirror with only _docker/ (these archives and their SHA256SUMS, or the sums given), indexed; the catalog."""
    folder = tmp_path / "Marvell_cloud" / "_docker"
    (folder / "images").mkdir(parents=True)
    lines = []
    for name, data in archives.items():
        (folder / "images" / f"{name}.tar.zst").write_bytes(data)
        lines.append(f"{(sums or {}).get(name) or hashlib.sha256(data).hexdigest()}  images/{name}.tar.zst\n")
    (folder / "SHA256SUMS").write_text("".join(lines))
    db = tmp_path / "catalog.db"
    result = vault("--catalog", str(db), "index", "--mirror", "marvell_cloud", "--quiet", str(folder.parent))
    assert result.code == 0, result.err
    return db


# -- recipes ---------------------------------------------------------------------------------------------------------
def write_recipe(tmp_path, monkeypatch, name: str, text: str):
    folder = tmp_path / "recipes" / "docker"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(text)
    monkeypatch.setenv("VAULT_RECIPES", str(tmp_path / "recipes"))
    return folder / f"{name}.toml"


def test_shipped_recipes_load_and_name_the_mirrors_images():
    from cloudvault.restore.docker.source import load_docker_recipe, recipe_names

    assert recipe_names() == ["headinfer", "neo", "tandemspec"]
    recipe = load_docker_recipe("tandemspec")
    assert (recipe.entry, recipe.archive, recipe.sha256sums) == ("_docker", "images/tandemspec.tar.zst", "SHA256SUMS")
    assert recipe.tags == ("junhyeong0724/marvell-tandemspec:tandemspec",)
    assert recipe.repository == "docker.io/junhyeong0724/marvell-tandemspec" and recipe.arch_list == "12.0"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('entry = "_docker"\narchive = "a.tar.zst"\ntags = ["x:y"]\nimage = "z"\n', "'image'"),
        ('entry = "_docker"\ntags = ["x:y"]\n', "'archive'"),
        ('entry = "_docker"\narchive = "a"\ntags = ["x:y"]\nconfig_digest = "sha256:12"\n', "'config_digest'"),
        ('entry = "_docker"\narchive = "a"\ntags = ["x:y"]\narch_list = "12.0 blackwell"\n', "'arch_list'"),
        ('entry = "_docker"\narchive = "a"\ntags = [1]\n', "'tags'"),
        ('entry = "_docker"\narchive = "a"\ntags = ["x:y"]\n[registry]\nrepo = "r"\n', "registry.repo"),
    ],
)
def test_bad_recipe_exits_2_naming_the_key(tmp_path, monkeypatch, vault, text, named):
    write_recipe(tmp_path, monkeypatch, "bad", text)
    result = vault("restore", "docker", "bad", "--check-gpu")
    assert result.code == 2
    assert named in result.err and "bad.toml" in result.err and len(result.err.strip().splitlines()) == 1


def test_unknown_recipe_exits_3_with_the_known_ones(vault):
    result = vault("restore", "docker", "tandem-spec", "--check-gpu")
    assert result.code == 3 and "tandemspec" in result.err


# -- --list --------------------------------------------------------------------------------------------------------
def test_list_shows_archive_tags_config_cuda_and_arch_from_the_catalog(demo_catalog, vault):
    result = vault("--catalog", str(demo_catalog), "restore", "docker", "--list", "--json")
    assert result.code == 0, result.err
    rows = {r["name"]: r for r in json.loads(result.out)["images"]}
    assert set(rows) == {"tandemspec", "neo", "headinfer"}
    neo = rows["neo"]
    expected_config = "sha256:" + hashlib.sha256(_config_bytes(images.demo_image("neo"))).hexdigest()
    assert neo["config_digest"] == expected_config
    assert (neo["cuda_version"], neo["arch_list"]) == ("12.8.1", "12.0")
    assert neo["arch_source"] == "TORCH_CUDA_ARCH_LIST=12.0 in the image config"
    assert neo["tags"] == ["junhyeong0724/marvell-tandemspec:neo"] and neo["problem"] is None
    assert neo["size"] == len(images.compress(images.demo_image("neo")))
    human = vault("--catalog", str(demo_catalog), "restore", "docker", "--list")
    assert "_docker/images/tandemspec.tar.zst" in human.out and expected_config[:19] in human.out


def _config_bytes(tar: bytes) -> bytes:
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        manifest = json.load(t.extractfile("manifest.json"))
        return t.extractfile(manifest[0]["Config"]).read()


def test_list_leaves_the_config_unread_when_it_would_cost_a_full_decode(demo_catalog, vault, monkeypatch):
    monkeypatch.setattr("cloudvault.restore.docker.restore.READ_BUDGET", 1000)
    result = vault("--catalog", str(demo_catalog), "restore", "docker", "--list", "--json")
    neo = {r["name"]: r for r in json.loads(result.out)["images"]}["neo"]
    assert neo["config_digest"] is None and neo["arch_source"] == "arch_list in recipe neo"
    assert "would decode" in neo["unread"] and "vault optimize _docker" in neo["unread"]


def test_list_without_a_catalog_shows_the_recipes(vault, tmp_path):
    result = vault("--catalog", str(tmp_path / "none.db"), "restore", "docker", "--list")
    assert result.code == 0 and "tandemspec" in result.out and "arch_list in recipe tandemspec" in result.out


# -- the GPU check -------------------------------------------------------------------------------------------------
def test_sm120_image_on_an_h200_exits_6_naming_both(demo_catalog, vault, tmp_path, monkeypatch, no_daemon):
    fake_gpu(monkeypatch, tmp_path / "bin", H200)
    result = vault("--catalog", str(demo_catalog), "restore", "docker", "tandemspec", "--check-gpu")
    assert result.code == 6
    assert "sm_120" in result.err and "9.0" in result.err and "sm_90" in result.err and "H200" in result.err
    assert "CANNOT RUN" in result.out
    restore = vault("--catalog", str(demo_catalog), "restore", "docker", "tandemspec")
    assert restore.code == 6 and "sm_120" in restore.err  # before the daemon is even asked


def test_sm120_image_fits_an_rtx_pro_6000(demo_catalog, vault, tmp_path, monkeypatch):
    fake_gpu(monkeypatch, tmp_path / "bin", RTX_PRO_6000)
    result = vault("--catalog", str(demo_catalog), "restore", "docker", "neo", "--check-gpu", "--json")
    assert result.code == 0, result.err
    fit = json.loads(result.out)["gpu"]
    assert fit["verdict"] == "fits" and fit["gpus"][0]["compute_cap"] == "12.0" and fit["archs"] == "sm_120"


def test_no_gpu_is_said_and_passes_unless_required(demo_catalog, vault, tmp_path, monkeypatch):
    fake_gpu(monkeypatch, tmp_path / "bin", None)
    result = vault("--catalog", str(demo_catalog), "restore", "docker", "neo", "--check-gpu")
    assert result.code == 0 and "no NVIDIA GPU here" in result.out
    required = vault("--catalog", str(demo_catalog), "restore", "docker", "neo", "--check-gpu", "--require-gpu")
    assert required.code == 6 and "no NVIDIA GPU found" in required.err


def test_check_gpu_runs_without_a_catalog_from_the_recipe(vault, tmp_path, monkeypatch):
    fake_gpu(monkeypatch, tmp_path / "bin", H200)
    result = vault("--catalog", str(tmp_path / "none.db"), "restore", "docker", "headinfer", "--check-gpu")
    assert result.code == 6 and "arch_list in recipe headinfer" in result.err


def test_ignore_gpu_lets_a_dry_run_go_on_to_the_daemon(demo_catalog, vault, tmp_path, monkeypatch, no_daemon):
    fake_gpu(monkeypatch, tmp_path / "bin", H200)
    result = vault("--catalog", str(demo_catalog), "restore", "docker", "neo", "--dry-run", "--ignore-gpu")
    assert result.code == 6 and "cannot reach the docker daemon" in result.err and "no-such.sock" in result.err


def test_dry_run_json_lists_every_problem(demo_catalog, vault, tmp_path, monkeypatch, no_daemon):
    fake_gpu(monkeypatch, tmp_path / "bin", H200)
    result = vault("--catalog", str(demo_catalog), "restore", "docker", "neo", "--dry-run", "--json")
    doc = json.loads(result.out)
    assert result.code == 6 and doc["exit_code"] == 6 and len(doc["problems"]) == 2
    assert doc["gpu"]["verdict"] == "mismatch" and doc["sha256"] == _demo_sha("neo")


def _demo_sha(name: str) -> str:
    return hashlib.sha256(images.compress(images.demo_image(name))).hexdigest()


# -- the verified stream -------------------------------------------------------------------------------------------
def _body(data: bytes, expected: str | None = None) -> VerifiedBody:
    expected = expected or hashlib.sha256(data).hexdigest()
    return VerifiedBody(lambda: io.BytesIO(data), label="x.tar.zst", expected_sha256=expected, sums_label="SUMS")


def _drain(body: VerifiedBody) -> tuple[bytes, Exception | None]:
    sent = []
    try:
        for piece in body:
            sent.append(piece)
    except Exception as exc:  # what the daemon would see: the body stops here
        return b"".join(sent), exc
    return b"".join(sent), None


def test_stream_passes_the_tar_through_unchanged_and_proves_the_image():
    tar = images.demo_image("neo")
    sent, error = _drain(body := _body(images.compress(tar)))
    assert error is None and sent == tar
    assert body.image.config.digest == "sha256:" + hashlib.sha256(_config_bytes(tar)).hexdigest()
    assert body.image.repo_tags == ("junhyeong0724/marvell-tandemspec:neo",)
    assert body.image.config.arch_list == "12.0"


def test_lying_sums_cut_the_stream_before_manifest_json():
    tar = images.demo_image("neo")
    sent, error = _drain(_body(images.compress(tar), expected="0" * 64))
    assert isinstance(error, ArchiveHashMismatch) and error.exit_code == 5
    assert tar.startswith(sent) and len(sent) < len(tar)
    assert tar.index(b"manifest.json") > len(sent)  # docker never saw what it needs to load anything


def test_a_blob_that_does_not_hash_to_its_name_cuts_the_stream_at_that_blob():
    tar = bytearray(images.demo_image("neo"))
    at = tar.index(b"BUILD.md")  # inside the app layer blob, which comes after the root layer
    tar[at + 600] ^= 0x01
    sent, error = _drain(_body(images.compress(bytes(tar))))
    assert isinstance(error, ArchiveDamaged) and "not the digest it is named by" in str(error)
    assert len(sent) < len(tar)


def test_a_layer_that_is_not_its_diff_id_is_refused(tmp_path):
    layers = [images.root_layer(), images.app_layer("x", "y")]
    config = images.image_config([layers[0], images.app_layer("other", "z")], images.BUILD_ENV, {})
    tar = images.save_archive("x/y:z", layers, config)
    sent, error = _drain(_body(images.compress(tar)))
    assert isinstance(error, ArchiveDamaged) and "diff_id" in str(error)
    assert b"manifest.json" not in sent[-4096:]


def test_not_a_docker_archive_is_damaged():
    tar = images.tar_bytes([("hello.txt", b"hi\n", None)])
    _, error = _drain(_body(images.compress(tar)))
    assert isinstance(error, ArchiveDamaged) and "manifest.json is missing" in str(error)


def test_classic_docker_save_layout_is_checked_too():
    """docker < 25 writes <id>/layer.tar and <config hex>.json; the layer is checked against its diff_id."""
    layers = [images.root_layer()]
    config = images.image_config(layers, images.BUILD_ENV, {})
    config_hex = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{"Config": f"{config_hex}.json", "RepoTags": ["a/b:c"], "Layers": ["abc/layer.tar"]}])
    members = [(f"{config_hex}.json", config, None), ("abc/", None, None), ("abc/layer.tar", layers[0], None)]
    tar = images.tar_bytes([*members, ("manifest.json", manifest.encode(), None)])
    sent, error = _drain(body := _body(images.compress(tar)))
    assert error is None and sent == tar and body.image.config.digest == f"sha256:{config_hex}"


def test_sha256sums_lines_are_found_by_path_or_unique_base_name():
    sums = oci.parse_sha256sums(f"{'a' * 64}  images/neo.tar.zst\n{'B' * 64} *headinfer.tar.zst\nnoise\n")
    assert oci.sums_entry(sums, "images/neo.tar.zst", "") == "a" * 64
    assert oci.sums_entry(sums, "images/headinfer.tar.zst", "") == "b" * 64
    assert oci.sums_entry(sums, "images/tandemspec.tar.zst", "") is None


def test_config_arch_list_and_cuda_version_come_from_env_or_labels():
    cfg = oci.ImageConfig("sha256:x", (), env={"NVIDIA_REQUIRE_CUDA": "cuda>=12.8 brand=tesla"},
                          labels={"org.example.cuda_arch_list": "9.0 12.0"})  # fmt: skip
    assert (cfg.arch_list, cfg.cuda_version) == ("9.0 12.0", "12.8")
    assert oci.ImageConfig("sha256:x", ()).arch_list is None


# -- the daemon's answer -------------------------------------------------------------------------------------------
class AnsweringClient:
    """A docker-py client whose load answers with these stream items (as dockerd does, inside an HTTP 200)."""

    def __init__(self, items: list[dict]) -> None:
        self.items = items

    def load_image(self, body):
        assert b"".join(body)
        return iter(self.items)


@pytest.mark.parametrize(
    ("items", "code", "text"),
    [
        ([{"errorDetail": {"message": "unexpected EOF"}, "error": "unexpected EOF"}], 5, "refused neo: unexpected EOF"),
        ([{"errorDetail": {"message": "write /var/lib/docker/tmp/x: no space\nleft on device"}}], 6, "no space left"),
        ([{"message": "open /var/lib/docker/tmp/docker-import-1/manifest.json: no such file"}], 5, "manifest.json"),
    ],
)
def test_error_detail_in_the_load_stream_becomes_one_line(items, code, text):
    from cloudvault.tools import docker as dd

    daemon = dd.Daemon(AnsweringClient(items), "unix:///x.sock", "20.10", "/var/lib/docker", False)
    with pytest.raises(Exception) as caught:
        dd.load(daemon, "neo", [b"tar bytes"])
    assert caught.value.exit_code == code and text in str(caught.value) and "\n" not in str(caught.value)


def test_loaded_lines_are_returned():
    from cloudvault.tools import docker as dd

    daemon = dd.Daemon(AnsweringClient([{"stream": "Loaded image: a/b:c\n"}]), "unix:///x", "20.10", "/", False)
    assert dd.load(daemon, "neo", [b"x"]) == ["Loaded image: a/b:c"]


# -- --scan-kernels ------------------------------------------------------------------------------------------------
FAKE_CUOBJDUMP = """#!/bin/sh
# lists the targets a test library names in its bytes, as cuobjdump lists a fatbin's
shift 2
targets=$(grep -ao 'FAKE-CUBIN sm_[0-9]*' "$1" | cut -d' ' -f2)
[ -z "$targets" ] && { echo "cuobjdump info    : File '$1' does not contain device code"; exit 0; }
i=1; for t in $targets; do echo "ELF file    $i: lib.$i.$t.cubin"; i=$((i + 1)); done
"""


def kernels_image() -> bytes:
    """An sm_120 image whose NEO extension was still built for sm_89 only (dashboard 2.2.29.1)."""
    libs = images.tar_bytes([
        ("usr/", None, None), ("usr/lib/", None, None),
        ("usr/lib/swiftllm_c.cpython-310-x86_64-linux-gnu.so", b"ELF..FAKE-CUBIN sm_89..", None),
        ("usr/lib/_C.abi3.so", b"ELF..FAKE-CUBIN sm_90..FAKE-CUBIN sm_120..", None),
        ("usr/lib/libplain.so.1", b"ELF..no device code..", None),
    ])  # fmt: skip
    layers = [images.root_layer(), libs]
    return images.save_archive("marvell/neo:k", layers, images.image_config(layers, images.BUILD_ENV, {}))


def scan_setup(tmp_path, monkeypatch, vault, gpu_line: str | None, with_tool: bool = True):
    db = docker_mirror(tmp_path, vault, {"neo": images.compress(kernels_image())})
    fake_gpu(monkeypatch, tmp_path / "bin", gpu_line)
    if with_tool:
        tool = tmp_path / "bin" / "cuobjdump"
        tool.write_text(FAKE_CUOBJDUMP)
        tool.chmod(0o755)
    return db


def test_scan_kernels_finds_the_library_that_cannot_run_on_the_gpu(tmp_path, monkeypatch, vault):
    db = scan_setup(tmp_path, monkeypatch, vault, RTX_PRO_6000)
    result = vault("--catalog", str(db), "restore", "docker", "neo", "--check-gpu", "--scan-kernels", "--json")
    doc = json.loads(result.out)
    assert result.code == 6 and "1 CUDA libraries of neo hold no kernels for GPU 0" in doc["error"]
    assert "swiftllm_c.cpython-310-x86_64-linux-gnu.so (sm_89)" in doc["error"] and "sm_120" in doc["error"]
    assert doc["kernels"] == {"usr/lib/swiftllm_c.cpython-310-x86_64-linux-gnu.so": ["sm_89"],
                              "usr/lib/_C.abi3.so": ["sm_90", "sm_120"]}  # fmt: skip


def test_scan_kernels_without_a_gpu_checks_the_targets_the_image_claims(tmp_path, monkeypatch, vault):
    db = scan_setup(tmp_path, monkeypatch, vault, None)
    result = vault("--catalog", str(db), "restore", "docker", "neo", "--check-gpu", "--scan-kernels")
    assert result.code == 0, result.err
    assert "kernels  usr/lib/_C.abi3.so: sm_90 sm_120" in result.out
    assert "swiftllm_c.cpython-310-x86_64-linux-gnu.so holds sm_89 only: no kernels for sm_120" in result.out


def test_scan_kernels_needs_cuobjdump(tmp_path, monkeypatch, vault):
    db = scan_setup(tmp_path, monkeypatch, vault, H200, with_tool=False)
    result = vault("--catalog", str(db), "restore", "docker", "neo", "--check-gpu", "--scan-kernels")
    assert result.code == 7 and "cuobjdump is not installed" in result.err


def test_cuobjdump_listing_is_parsed_into_targets():
    from cloudvault.tools.cuda import parse_cuobjdump
    from cloudvault.tools.gpu import Arch

    text = (
        "ELF file    1: libtorch_cuda.1.sm_90.cubin\nELF file    2: libtorch_cuda.2.sm_120a.cubin\n"
        "PTX file    1: libtorch_cuda.1.sm_90.ptx\ncuobjdump info    : File 'x' does not contain device code\n"
    )
    assert parse_cuobjdump(text) == [Arch(9, 0), Arch(9, 0, True), Arch(12, 0, False, "a")]


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 70_000), min_size=1, max_size=4), lie=st.booleans(), level=st.integers(1, 5))
def test_property_the_daemon_never_sees_manifest_json_unless_every_check_passed(sizes, lie, level):
    """Any image (layers of any size, any zstd level): an honest archive passes through byte for byte; with a
    lying SHA256SUMS the bytes sent are a strict prefix that stops before manifest.json."""
    import zstandard

    layers = [images.tar_bytes([(f"f{i}.bin", os.urandom(n), None)]) for i, n in enumerate(sizes)]
    tar = images.save_archive("p/q:r", layers, images.image_config(layers, images.BUILD_ENV, {}))
    data = zstandard.ZstdCompressor(level=level).compress(tar)
    sent, error = _drain(_body(data, expected="f" * 64 if lie else None))
    if lie:
        assert isinstance(error, ArchiveHashMismatch) and tar.startswith(sent) and len(sent) < len(tar)
        assert len(sent) <= tar.index(b"index.json") and b"manifest.json" not in sent
    else:
        assert error is None and sent == tar


def test_a_tag_held_by_another_image_is_one_conflict_or_with_retag_one_move():
    from cloudvault.restore.docker.restore import Choices, move_note, tag_verdict
    from cloudvault.restore.docker.source import load_docker_recipe

    recipe = load_docker_recipe("neo")
    holders = {"neo:latest": "sha256:" + "b" * 64, "neo:1": None, "neo:2": "sha256:" + "a" * 64}
    moves, conflicts = tag_verdict(Choices(recipe, "archive"), holders, {"sha256:" + "a" * 64}, "sha256:" + "a" * 64)
    assert moves == {} and [c.fields["tag"] for c in conflicts] == ["neo:latest"]
    moves, conflicts = tag_verdict(Choices(recipe, "archive", retag=True), holders, {"sha256:" + "a" * 64}, None)
    assert moves == {"neo:latest": "sha256:" + "b" * 64} and conflicts == []
    note = move_note("neo:latest", moves["neo:latest"])
    assert note == f"tag neo:latest moves from image sha256:{'b' * 12} (--retag)"


def test_pull_progress_counts_the_bytes_of_the_layers_announced_so_far():
    from cloudvault.tools.docker import PullProgress

    counter = PullProgress()
    events = [
        {"status": "Pulling from marvell-tandemspec", "id": "neo"},
        {"status": "Pulling fs layer", "id": "a1", "progressDetail": {}},
        {"status": "Downloading", "id": "a1", "progressDetail": {"current": 100, "total": 400}},
        {"status": "Downloading", "id": "b2", "progressDetail": {"current": 50, "total": 100}},
        {"status": "Download complete", "id": "b2", "progressDetail": {}},
        {"status": "Downloading", "id": "a1", "progressDetail": {"current": 300, "total": 400}},
    ]
    assert [counter.feed(e) for e in events] == [(0, 0), (0, 0), (100, 400), (150, 500), (200, 500), (400, 500)]
    assert counter.feed({"status": "Pull complete", "id": "a1"}) == (500, 500)
