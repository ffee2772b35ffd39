"""Build a small but faithful Marvell_cloud/ mirror: the 24 directories, their docs, data and archives."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import zstandard

from cloudvault.errors import UsageError
from cloudvault.index.definition import load_manifest, manifest_table
from cloudvault.models import Entry

MTIME = 1758758400  # 2026-09-25, when the copies were made
FAKE_TOKEN = "hf_" + "DemoTokenNotRealXq7Lm2Pz9Wc4Rt8Yb1Nv5Ks3"
LOW_ENTROPY = bytes((b & 0x0F) | 0x30 for b in range(256))  # dump-like bytes: ~4 bits each, compress ~2x


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.utime(path, (MTIME, MTIME))


def _dump_bytes(rng: random.Random, size: int) -> bytes:
    return rng.randbytes(size).translate(LOW_ENTROPY)


def _log_lines(rng: random.Random, name: str, n: int) -> str:
    steps = (f"[{name}] step {i} accept_len={rng.randint(1, 7)} t={rng.random() * 20:.3f}ms" for i in range(n))
    return "\n".join(steps) + "\n"


# -- top level ------------------------------------------------------------------------------------------------
def _top_level(root: Path, entries: dict[str, Entry]) -> None:
    rows = "\n".join(f"| {e.entry_id} | {e.what} | {e.node_gpu} | {e.size_text} |" for e in entries.values())
    _write(root / "README.md", f"# Marvell_cloud\n\n| dir | what | node/GPU | size |\n|---|---|---|---|\n{rows}\n")
    catalog = "\n".join(
        f"| {e.entry_id} | {e.what} | {e.node_gpu} | {e.measured} | {e.size_text} | {'; '.join(e.key_files)} "
        f"| {e.caution} |"
        for e in entries.values()
    )
    _write(
        root / "CATALOG.md", f"# CATALOG\n\n| dir | what | node | measured | size | key files | caution |\n{catalog}\n"
    )
    _write(
        root / "HOW_TO_USE.md",
        "# How to use this backup\n\n"
        "- Find by keyword: `grep -i <model|bug|node> SEARCH_INDEX.tsv | cut -f1,3,4`\n"
        "- Then the README.md table, then that directory's ENVIRONMENT.md\n"
        "- Inside archives (018-021): grep `*.tar.zst.list`, then `tar -I zstd -xf <archive> <file>`\n"
        "- Re-run an experiment: _repro/README.md section 1, RUN_RECIPES.md, ENV_VARS.md\n"
        "- Docker: _docker/README.md section 1\n"
        "- Nebius conda: 015 data/miniforge3_tar, unpacked at /mnt/filesystem-h8/miniforge3\n",
    )
    keywords = {
        "004": "granite;Granite-4.2-30B;vanilla;sparsespec;AIME25",
        "012": "granite;Granite-4.2-30B;medium20;LOG_SS=2",
        "005": "magistral;Magistral-Small-2509;tekken.json",
        "006": "qwen3-4b;runpod;b16;b32;b64",
        "014": "qwen3-30b-a3b;temp0;670bf1c4;rep2",
        "019": "HF_TOKEN;run10;sweep_test;n61",
    }
    lines = [f"{e.entry_id}\t{keywords.get(e.entry_id[:3], '')}\t{e.what}\t{e.node_gpu}" for e in entries.values()]
    _write(root / "SEARCH_INDEX.tsv", "dir\tkeywords\twhat\tnode\n" + "\n".join(lines) + "\n")
    status = {"updated": "2026-09-26T18:00:00+09:00", "jobs": {"raw": "done", "repro": "done", "docker": "done"}}
    _write(root / "backup_status.json", json.dumps(status, indent=2) + "\n")


def _environment_md(entry: Entry) -> str:
    settings = json.loads(entry.settings_json)
    lines = [f"# {entry.entry_id}", "", f"- what: {entry.what}", f"- node/GPU: {entry.node_gpu}"]
    lines += [f"- measured: {entry.measured}", f"- size: {entry.size_text}"]
    if entry.caution:
        lines.append(f"- caution: {entry.caution}")
    for key, value in settings.items():
        lines.append(f"- {key}: {json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value}")
    return "\n".join(lines) + "\n"


# -- plain data -----------------------------------------------------------------------------------------------
def _per_request(root: Path, entry: str, run_dir: str) -> None:
    table = manifest_table("marvell_cloud", f"{entry[:3]}_per_request.csv")
    _write(root / entry / "data" / run_dir / "per_request.csv", table)
    rows = [r for r in csv.DictReader(io.StringIO(table)) if r["role"] == "measured"]
    out = sum(int(r["output_tokens"]) for r in rows)
    e2e = sum(float(r["e2e_s"]) for r in rows)
    totals = f"measured,output_tokens,tokens_per_s\n{len(rows)},{out},{out / e2e:.2f}\n"
    _write(root / entry / "data" / run_dir / "totals.csv", totals)


# Small files of the entries, as the source documents name them.
STATIC_FILES = {
    "001_rtx_pro6000_sweep/data/rtx_cells.json": '{"cells": 29, "lengths": [128, 256, 420]}',
    "001_rtx_pro6000_sweep/script/collect_cells.py": "import json\nprint(json.load(open('rtx_cells.json')))\n",
    "017_runpod_pro6000_workspace_mirror/data/workspace/cs/PLAYBOOK.md": (
        "# RunPod playbook\n\nRUNROOT and LIB point at the backup when redrawing.\n"
    ),
    "017_runpod_pro6000_workspace_mirror/data/workspace/cs/backup/RESTORE.md": (
        "# Restore\n\nzstd -d env-*.tar.zst first, then tar -xf at /workspace/env\n"
    ),
    "_repro/README.md": "# Reproduction kit\n\n## 1. At a glance\n\n| exp | recipe |\n|---|---|\n| 014 | ss20 |\n",
    "004_granite_30b_batch_sweep/data/_cells_summary.csv": "arm,batch,tps\ngra_van,8,412.5\n",
    "005_magistral_24b_batch_sweep/data/mag_ss_b16r64_c32k/summary.csv": "batch,tps\n16,301.2\n",
    "006_qwen3_4b_batch_sweep/data/runpod_sweep_20260921/b16/summary.csv": "batch,tps\n16,980.1\n",
    "007_longcontext_4way/data/results_archive.csv": "system,e2e_kind,e2e_s\nNEO,measured,91.2\n",
    "008_diagnostics/script/membw.sh": "#!/bin/sh\nnumactl --hardware\n",
    "009_compressspec_figures/data/01_intro/fig1.py": "import matplotlib\n",
    "010_aime_kv_pruning/data/snapkv_25/summary.jsonl": '{"method": "SnapKV", "ratio": 0.25}\n',
    "015_nebius_h8_raw_mirror/data/miniforge3_tar/README.md": "Unpack at /mnt/filesystem-h8/miniforge3\n",
    "015_nebius_h8_raw_mirror/data/cs/run/README.md": "run roots of filesystem-h8\n",
    "016_ysshin_rtxpro6000_results/data/results/plot_tps.py": "import plot_style\n",
    "022_compaction_sweep_monitor/data/job_9f4386c4_tmp/serve/index.html": "<html>Sweep Monitor</html>\n",
    "_repro/RUN_RECIPES.md": "# Run recipes\n\nss20_temp0_c1024: LOG_SS=1 SSPEC_FIXED_OUTPUT=8192\n",
    "_repro/ENV_VARS.md": "# Env vars\n\nLOG_SS=1 SSPEC_REQ_TIMING=1 SSPEC_CPU_CAP_MULT=1\n",
    "_repro/BUILD.md": "# Build\n\nSparseSpec 8246fb6, vLLM 0.14.1.dev236\n",
    "_repro/scripts/nebius_1.51_mrun/RECOVERY.md": "Original ~/mrun/scripts/ lost; recovered copies.\n",
    "_docker/README.md": "# Docker images\n\n## 1. Images\n\ntandemspec, neo, headinfer for sm_120\n",
    "_docker/SHA256SUMS": "",
}


def _plain_data(root: Path, rng: random.Random) -> None:
    for rel, text in STATIC_FILES.items():
        _write(root / rel, text)
    for entry in ("002_tandemspec_saturate_throughput", "003_saturate_socket1_omp_smt"):
        _write(root / entry / "data/_run_headers.txt", "batch,omp,smt\n4,21,on\n")
        _write(root / entry / "data/results/b4_omp21.console", _log_lines(rng, "saturate", 50))
    for arm in ("gra_van_b8r32_20260920_105100", "gra_ss_b16r64_20260920_231502"):
        _write(root / f"004_granite_30b_batch_sweep/data/{arm}/summary.csv", "batch,tps\n8,412.5\n")
    for entry, ts in (
        ("011_medium144_sparsespec_b1", "20260924_223011"),
        ("012_granite_medium20_sparsespec_b1", "20260925_021533"),
    ):
        _write(root / entry / f"data/{ts}/totals.csv", "measured,output_tokens\n20,51234\n")
    _per_request(root, "013_vanilla126_temp0_cap8192", "20260925_061459")
    _per_request(root, "014_ss20_temp0_chunk1024", "20260925_070231")
    shards = {f"gpu{g}": ["warmup", "long", "short"] for g in range(8)}
    _write(root / "014_ss20_temp0_chunk1024/data/20260925_070231/shards.json", json.dumps(shards, indent=1))
    compare = "doc_id,identical,first_divergence\n670bf1c4bb02136c067d2341,0,1498\n"
    _write(root / "014_ss20_temp0_chunk1024/data/ss20_temp0_c1024_rep2/20260925_072725/compare_vs_rep1.csv", compare)


# -- archives -------------------------------------------------------------------------------------------------
def _stage(rng: random.Random, kind: str, dump_mb: float, n_logs: int) -> dict[str, bytes]:
    files = {f"logs/{kind}_{i:02d}.log": _log_lines(rng, kind, 200).encode() for i in range(n_logs)}
    files[f"dumps/run10/{kind}_accept.json"] = json.dumps([rng.random() for _ in range(2000)]).encode()
    files[f"dumps/run10/{kind}_scores.bin"] = _dump_bytes(rng, int(dump_mb * (1 << 20)))
    files[f"dumps/{kind}_meta.json"] = json.dumps({"kind": kind, "node": "n81"}).encode()
    return files


def _tar_with_cli(src: Path, out: Path, compressor: list[str]) -> None:
    with open(out, "wb") as fh:
        tar = subprocess.Popen(["tar", "--format=gnu", "-C", str(src), "-cf", "-", "."], stdout=subprocess.PIPE)
        subprocess.run(compressor, stdin=tar.stdout, stdout=fh, check=True)
        if tar.wait() != 0:
            raise RuntimeError(f"tar failed for {src}")


def _tar_with_python(src: Path, out: Path, frame_raw: int = 1 << 20) -> None:
    """Python's tarfile (pax) and one independent zstd frame per MiB: a seekable archive."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(src, arcname=".")
    data = buf.getvalue()
    cctx = zstandard.ZstdCompressor(level=3, write_checksum=True)
    with open(out, "wb") as fh:
        for i in range(0, len(data), frame_raw):
            fh.write(cctx.compress(data[i : i + frame_raw]))


def _archive(root: Path, rel: str, files: dict[str, bytes], how: str, work: Path) -> None:
    src = work / rel.replace("/", "_")
    for name, data in files.items():
        _write(src / name, data)
    for path in (src, *src.rglob("*")):  # the demo's mtime on every member: a rebuilt demo is the same bytes
        os.utime(path, (MTIME, MTIME))
    out = root / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    have_cli = shutil.which("tar") and shutil.which("zstd") and shutil.which("pzstd")
    if how == "python" or not have_cli:
        _tar_with_python(src, out)
    elif how == "pzstd":
        _tar_with_cli(src, out, ["pzstd", "-q", "-p", "2", "-3"])
    elif how == "zstd-T0":
        _tar_with_cli(src, out, ["zstd", "-q", "-T0", "-3"])
    else:
        _tar_with_cli(src, out, ["zstd", "-q", "-3"])
    names = sorted({"./"} | {f"./{n}" for n in files} | {f"./{d}/" for n in files for d in _parents(n)})
    _write(out.with_name(out.name + ".list"), "\n".join(names) + "\n")
    os.utime(out, (MTIME, MTIME))


def _parents(name: str) -> list[str]:
    parts = name.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


ARCHIVES = [
    # entry, archive path inside the entry, kind of payload, dump MiB, logs, how it is compressed
    ("018_aicluster_breakdown_debugger", "data/breakdown_b8_n81.tar.zst", "breakdown", 10, 6, "zstd"),
    ("018_aicluster_breakdown_debugger", "data/compaction_n84.tar.zst", "compaction", 12, 4, "pzstd"),
    ("018_aicluster_breakdown_debugger", "data/accept_g07.tar.zst", "accept", 4, 4, "python"),
    ("018_aicluster_breakdown_debugger", "data/phase_n88_h200.tar.zst", "phase", 2, 3, "zstd-T0"),
    ("019_aicluster_dump_debugger", "data/saturate_logs_n61.tar.zst", "saturate", 1, 5, "zstd"),
    ("019_aicluster_dump_debugger", "data/score_block_n82.tar.zst", "score", 2, 2, "pzstd"),
    ("020_aicluster_baseline", "data/ruler_baseline.tar.zst", "ruler", 2, 4, "zstd"),
    ("020_aicluster_baseline", "data/aime_pruning.tar.zst", "aime", 1, 3, "python"),
    ("021_aicluster_judge_debugger", "data/session_standard.tar.zst", "judge", 3, 3, "pzstd"),
    ("021_aicluster_judge_debugger", "data/session_cactus.tar.zst", "cactus", 1, 2, "zstd"),
]


DEMO_MARK = ".vault-demo"


def refuse_foreign(dest: Path, path: Path) -> None:
    """The demo replaces only what an earlier demo built: a folder there that vault did not make is the user's."""
    if os.path.lexists(path) and not (dest / DEMO_MARK).is_file():
        raise UsageError(detail=f"{path} exists and was not built by `vault demo`; refusing to replace it "
                         "(choose another --dir)")  # fmt: skip


# Parts of the demo that the restore and repro features add: each module has build(tree) (files inside the
# Marvell_cloud tree being staged) and optionally build_extra(dest) (other mirrors beside it); the `vault` command
# lines the demo walks for each are cli/demo.py's (the grammar lives in cli/).
DEMO_PARTS = ("cloudvault.demo.envs", "cloudvault.demo.images", "cloudvault.demo.serving")


def demo_parts() -> list:
    import importlib
    import importlib.util

    return [importlib.import_module(name) for name in DEMO_PARTS if importlib.util.find_spec(name)]


def build_demo(dest: Path, seed: int = 20260925) -> Path:
    """Write the demo mirror to dest/Marvell_cloud (replacing an earlier demo there) and return its root."""
    rng = random.Random(seed)
    entries = load_manifest("marvell_cloud")
    root = dest / "Marvell_cloud"
    refuse_foreign(dest, root)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / DEMO_MARK).write_text("built by `vault demo`; vault may replace what it built here\n")
    staging = Path(tempfile.mkdtemp(prefix=".demo-", dir=dest))
    try:
        tree = staging / "Marvell_cloud"
        _top_level(tree, entries)
        for entry in entries.values():
            _write(tree / entry.entry_id / "ENVIRONMENT.md", _environment_md(entry))
        _plain_data(tree, rng)
        for entry, rel, kind, dump_mb, logs, how in ARCHIVES:
            files = _stage(rng, kind, dump_mb, logs)
            if entry.startswith("019") and kind == "saturate":
                files["logs/saturate_env.log"] = f"export HF_HOME=/data/hf\nexport HF_TOKEN={FAKE_TOKEN}\n".encode()
            _archive(tree, f"{entry}/{rel}", files, how, staging / "src")
        _write(tree / "018_aicluster_breakdown_debugger/logs/verify_summary.txt", "md5 sample check: 10/10 ok\n")
        _write(tree / "019_aicluster_dump_debugger/logs/README.md", "Logs contain HF_TOKEN in plaintext: never share\n")
        _write(tree / "021_aicluster_judge_debugger/logs/judge_dump_sizes.tsv", "session\tbytes\nstandard\t1\n")
        for part in demo_parts():
            part.build(tree)
        if root.exists():
            shutil.rmtree(root)
        os.replace(tree, root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for part in demo_parts():
        if hasattr(part, "build_extra"):
            part.build_extra(dest)
    return root
