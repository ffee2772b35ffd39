"""The demo's reproduction material: 014/013 inputs and token ids, 016's plots, 017's bundle, and a serving-benchmark
result tree (seed 001) as a second mirror beside Marvell_cloud.

014's first run and its rep2 carry per-request token ids made by the stand-in model (`cloudvault.repro.standin`)
from the recorded per-request table: every request ends at its recorded length, and rep2's doc 670bf1c4 takes the
runner-up token at output 1,498 and ends at 1,855 (the record's 1,956 / 1,855), so rep2 vs rep1 is 23 of 24
identical. Timestamps are rebuilt from the recorded TTFT/TPOT; rep2's are jittered by under 1%.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import zstandard

from cloudvault.demo.build import FAKE_TOKEN, MTIME
from cloudvault.index.definition import manifest_table
from cloudvault.repro import standin

E014 = "014_ss20_temp0_chunk1024"
E013 = "013_vanilla126_temp0_cap8192"
REP1 = f"{E014}/data/20260925_070231"
REP2 = f"{E014}/data/ss20_temp0_c1024_rep2/20260925_072725"
PROGRAMS = Path(__file__).parent / "programs"
MODEL_PATH = "_repro/standin/tiny-qwen3-30b-a3b.json"
DIVERGED_DOC, DIVERGED_AT, DIVERGED_LENGTH = "670bf1c4bb02136c067d2341", 1498, 1855
START_014 = 1790287351.0  # 2026-09-25 07:02:31 KST, the first run's folder name

# The stand-in model: Qwen3's vocabulary size and EOS id, and per-engine cost models fitted to 014's and 013's
# recorded tables (TTFT = a*p + b*p^2 s, TPOT = c + d*p ms, p = prompt tokens / 100,000).
STANDIN_MODEL = {
    "name": "tiny-qwen3-30b-a3b (stand-in: seeded bigram hash, no weights)",
    "vocab": 151936,
    "eos_id": 151645,
    "seed": 20250725,
    "cost": {"sparsespec": {"ttft": [3.3, 22.2], "tpot": [12.0, 0.8]},
             "vllm": {"ttft": [2.71, 10.64], "tpot": [6.96, 6.17]}},
}  # fmt: skip


def program(name: str) -> str:
    """A program of the demo's lab (a plotter, a summarizer, a bundle script), kept as a real file in programs/."""
    return (PROGRAMS / name).read_text(encoding="utf-8")


def put(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    os.utime(path, (MTIME, MTIME))


def recorded_rows(entry: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(manifest_table("marvell_cloud", f"{entry[:3]}_per_request.csv"))))


def doc_inputs(rows: list[dict]) -> list[dict]:
    """The documents as the harness reads them, per GPU in run order (warm-up first): prompt length, a few prompt
    token ids, and the stand-in's EOS schedule (the recorded output length of a request that ended by EOS)."""
    docs = []
    for row in rows:
        head = hashlib.blake2b(row["doc_id"].encode(), digest_size=16).digest()
        eos = row["finish"] != "cap"
        docs.append({"idx": int(row["idx"]), "doc_id": row["doc_id"], "role": row["role"], "gpu": int(row["gpu"]),
                     "order": row.get("order", ""), "prompt_tokens": int(row["prompt_tokens"]),
                     "prompt_head": [int.from_bytes(head[i:i + 2]) for i in range(0, 16, 2)],
                     "standin_eos_after": int(row["output_tokens"]) if eos else None})  # fmt: skip
    return sorted(docs, key=lambda d: (d["gpu"], d["role"] != "warmup", d["order"], d["idx"]))


def _jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)


def _tar_zst(path: Path, files: dict[str, bytes]) -> None:
    """A one-frame .tar.zst (folders included, as tar makes them) with its .tar.zst.list beside it."""
    dirs = sorted({"/".join(n.split("/")[: i + 1]) for n in files for i in range(n.count("/"))})
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in [".", *dirs]:
            info = tarfile.TarInfo("./" if name == "." else f"./{name}/")
            info.type, info.mtime, info.mode = tarfile.DIRTYPE, MTIME, 0o755
            tar.addfile(info)
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(f"./{name}")
            info.size, info.mtime, info.mode = len(data), MTIME, 0o644
            tar.addfile(info, io.BytesIO(data))
    put(path, zstandard.ZstdCompressor(level=3, write_checksum=True).compress(buf.getvalue()))
    listing = ["./", *(f"./{d}/" for d in dirs), *(f"./{n}" for n in sorted(files))]
    put(path.with_name(path.name + ".list"), "\n".join(listing) + "\n")


@functools.lru_cache(maxsize=64)
def _token_ids(doc_id: str, head: tuple, eos_after: int | None, diverge: tuple | None) -> list[int]:
    """One document's stand-in output, made once for both runs (warm-up docs run on two GPUs, too)."""
    doc = {"doc_id": doc_id, "prompt_head": list(head), "standin_eos_after": eos_after}
    return standin.generate(STANDIN_MODEL, doc, cap=8192, diverge=diverge)[0]


def _requests(docs: list[dict], rows: dict, start: float, *, jitter: float = 0.0, rep2: bool = False) -> list[dict]:
    """The token ids and timestamps of every request of one run, rebuilt from its per-request table."""
    clocks: dict[int, float] = {}
    records = []
    for doc in docs:
        row = rows[(doc["doc_id"], doc["gpu"])]
        diverge = (DIVERGED_AT, DIVERGED_LENGTH) if rep2 and doc["doc_id"] == DIVERGED_DOC else None
        ids = _token_ids(doc["doc_id"], tuple(doc["prompt_head"]), doc["standin_eos_after"], diverge)
        wobble = 1 + jitter * (((doc["idx"] * 7919 + doc["gpu"] * 104729) % 200) / 100 - 1)
        ttft, tpot = float(row["ttft_s"]) * wobble, float(row["tpot_ms"]) * wobble
        t_start = clocks.get(doc["gpu"], start + doc["gpu"] * 0.5)
        t_first = t_start + ttft
        t_done = t_first + tpot / 1000 * (len(ids) - 1)
        clocks[doc["gpu"]] = t_done
        records.append({"request": f"{doc['doc_id']}@gpu{doc['gpu']}", "doc_id": doc["doc_id"], "gpu": doc["gpu"],
                        "t_start": round(t_start, 3), "t_first": round(t_first, 3), "t_done": round(t_done, 3),
                        "output_ids": ids})  # fmt: skip
    return records


def _table_from(rows: list[dict], records: list[dict]) -> str:
    """A per-request table in the recorded format whose numbers are those of records."""
    by_key = {r["request"]: r for r in records}
    out = io.StringIO()
    writer = csv.DictWriter(out, list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        rec = by_key[f"{row['doc_id']}@gpu{row['gpu']}"]
        n = len(rec["output_ids"])
        e2e = rec["t_done"] - rec["t_start"]
        writer.writerow(
            {
                **row,
                "output_tokens": n,
                "ttft_s": f"{rec['t_first'] - rec['t_start']:.2f}",
                "tpot_ms": f"{(rec['t_done'] - rec['t_first']) / (n - 1) * 1000:.2f}",
                "e2e_s": f"{e2e:.1f}",
                "tps": f"{n / e2e:.2f}",
                "finish": "cap" if n >= 8192 else "eos",
            }
        )
    return out.getvalue()


def build_014_013(tree: Path) -> None:
    put(tree / MODEL_PATH, json.dumps(STANDIN_MODEL, indent=1) + "\n")
    rows14 = recorded_rows(E014)
    docs14 = doc_inputs(rows14)
    _tar_zst(tree / E014 / "data/inputs.tar.zst", {"docs/ss20_temp0_docs.jsonl": _jsonl(docs14).encode()})
    by_key = {(r["doc_id"], int(r["gpu"])): r for r in rows14}
    put(tree / REP1 / "requests.jsonl", _jsonl(_requests(docs14, by_key, START_014)))
    rep2 = _requests(docs14, by_key, START_014 + 1494, jitter=0.008, rep2=True)
    put(tree / REP2 / "requests.jsonl", _jsonl(rep2))
    put(tree / REP2 / "per_request.csv", _table_from(rows14, rep2))
    shards = {f"gpu{g}": [d["doc_id"] for d in docs14 if d["gpu"] == g] for g in range(8)}
    put(tree / REP2 / "shards.json", json.dumps(shards, indent=1) + "\n")
    docs13 = doc_inputs(recorded_rows(E013))
    _tar_zst(tree / E013 / "data/inputs.tar.zst", {"docs/medium126_docs.jsonl": _jsonl(docs13).encode()})


# -- 016's plots and 017's bundle: scripts that really run, with the outputs they made -------------------------
E016 = "016_ysshin_rtxpro6000_results"
E017 = "017_runpod_pro6000_workspace_mirror"
RUNPOD_SWEEP = {  # batch: requests, output tokens, stable tok/s, e2e tok/s
    16: (64, 1203388, 980.1, 912.4),
    32: (128, 2391045, 1502.4, 1388.0),
    64: (256, 4790112, 2011.7, 1810.3),
}


def build_016(tree: Path) -> None:
    """016's results with plot_style.py and plot_tps.py, and the plot data and figures they drew."""
    import subprocess
    import sys

    results = tree / E016 / "data/results"
    for name, entry in (("ss20_temp0", E014), ("vanilla126_temp0", E013)):
        put(results / f"RTXPRO6000/longcontext/{name}/per_request.csv",
            manifest_table("marvell_cloud", f"{entry[:3]}_per_request.csv"))  # fmt: skip
    put(results / "plot_style.py", program("plot_style.py"))
    put(results / "plot_tps.py", program("plot_tps.py"))
    # -B: no __pycache__/plot_style.*.pyc left in the mirror (its name would depend on the machine's Python)
    subprocess.run([sys.executable, "-B", "plot_tps.py"], cwd=results, check=True)
    for made in [*results.glob("plot_data/*"), *results.glob("figs/*")]:
        os.utime(made, (MTIME, MTIME))


def build_017(tree: Path) -> None:
    """017's run folders, results_archive/make_bundle.sh + redraw.sh + lib/, and the bundle and figure they made."""
    import subprocess

    cs = tree / E017 / "data/workspace/cs"
    for batch, (n, out, stable, e2e) in RUNPOD_SWEEP.items():
        put(cs / f"run/qwen3_4b_b{batch}/summary.csv",
            f"batch,requests,output_tokens,stable_tps,e2e_tps\n{batch},{n},{out},{stable},{e2e}\n")  # fmt: skip
    archive = cs / "results_archive"
    put(archive / "make_bundle.sh", program("make_bundle.sh"))
    put(archive / "redraw.sh", program("redraw.sh"))
    put(archive / "lib/redraw.py", program("redraw.py"))
    env = {**os.environ, "RUNROOT": str(cs / "run"), "LIB": str(archive / "lib"), "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run(["sh", "-c", "sh make_bundle.sh && sh redraw.sh"], cwd=archive, env=env, check=True)
    for made in [*archive.glob("bundle/*"), *archive.glob("figs/*")]:
        os.utime(made, (MTIME, MTIME))


def build(tree: Path) -> None:
    """Add the reproduction material to the staged Marvell_cloud tree."""
    build_014_013(tree)
    build_016(tree)
    build_017(tree)
    build_gpu_smoke(tree)


def build_gpu_smoke(tree: Path) -> None:
    """The gpu_greedy_smoke recipe's recorded folder (made by cloudvault.repro.gpu_smoke; kept beside the recipes)."""
    from importlib.resources import files

    recorded = files("cloudvault.recipe_files") / "repro" / "recorded" / "gpu_greedy_smoke"
    if not recorded.is_dir():  # an install without the recorded folders: the recipe then has no record to read
        return
    for item in recorded.iterdir():
        if item.is_file():
            put(tree / "_repro/gpu_greedy_smoke/recorded" / item.name, item.read_bytes())
    bound = files("cloudvault.recipe_files") / "repro" / "recorded" / "gpu_bound_decode"  # rep1..3 (H200)
    for rep in bound.iterdir() if bound.is_dir() else []:
        for item in rep.iterdir() if rep.is_dir() else []:
            put(tree / "_repro/gpu_bound_decode" / rep.name / item.name, item.read_bytes())


# -- the serving-benchmark result tree (seed 001), a second mirror -----------------------------------------------
SERVING = "qwen3.8-flash-next-c4"
AB_DIR = "c4-mtp-ab"
ARM_RUNS = {"mtp3": ("mtp3/results/c4-mtp3-20260927T064349Z", 1790491429.0, 3),
            "mtp2": ("mtp2/results/c4-mtp2-20260927T070232Z", 1790492552.0, 2)}  # fmt: skip
# Section 8 of the report: output tok/s, 3-trial range, TTFT median, GPU tok/J, accepted tokens per draft.
AB_TABLE = {
    ("mtp3", "english"): (113.54, 111.70, 116.42, 0.568, 3.427, 1.3106),
    ("mtp2", "english"): (117.07, 115.56, 117.87, 0.554, 3.592, 1.0),
    ("mtp3", "coding"): (138.98, 132.93, 150.80, 0.572, 4.136, 1.7994),
    ("mtp2", "coding"): (135.93, 134.11, 137.14, 0.561, 4.107, 1.382),
}
PROMPT_TOKENS = {"english": 1076, "coding": 1073}
CACHED_TOKENS, COMPLETION, DRAFTS_PER_BATCH = 832, 2048, 5000
RECIPE_COMMIT = "d23790b440d9a0977951ebbe3883ba44b89814da"
IMAGE_ID = "sha256:91d9b077589e7ebb9399ea8db07787bd40cc04ba96a767f021ffdf3e321ea9a0"
TTFT_OFFSETS = (-0.06, 0.05, -0.04, 0.03, -0.02, 0.01, -0.01, 0.02, -0.03, 0.04, -0.05, 0.06)


def _json(doc: object) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def _trial_rates(agg: float, low: float, high: float) -> list[float]:
    """Three batch rates whose tokens / summed spans is agg: the middle one solved from the two ends."""
    return [1 / (3 / agg - 1 / low - 1 / high), low, high]


def _prom(counters: dict[str, float]) -> str:
    lines = []
    for name, value in counters.items():
        lines += [f"# TYPE {name} counter", f'{name}{{model_name="qwen3.8-flash-next"}} {value:.1f}']
    return "\n".join(lines) + "\n"


def _batch_files(arm: str, domain: str, trial: int, start: float, rate: float, counters: dict) -> dict[str, str]:
    """One measured C4 batch: 4 requests, their responses and SSE streams, .prom snapshots, power samples."""
    agg, low, high, ttft, tok_j, per_draft = AB_TABLE[(arm, domain)]
    span = 4 * COMPLETION / rate
    files, k = {}, ARM_RUNS[arm][2]
    for i in range(4):
        t_start = round(start + 0.01 * i, 6)
        t_end = round(start + span - 0.4 * (3 - i), 6)
        t_first = round(t_start + ttft + TTFT_OFFSETS[(trial - 1) * 4 + i], 6)
        files[f"requests/r{i}.json"] = _json({"model": "qwen3.8-flash-next", "fixture": f"fixtures/{domain}.json",
                                              "max_tokens": COMPLETION, "min_tokens": COMPLETION, "ignore_eos": True,
                                              "temperature": 0, "seed": 1234, "stream": True})  # fmt: skip
        usage = {"prompt_tokens": PROMPT_TOKENS[domain], "completion_tokens": COMPLETION,
                 "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS}}  # fmt: skip
        files[f"responses/r{i}.json"] = _json({"t_start": t_start, "t_end": t_end, "usage": usage,
                                               "finish_reason": "length"})  # fmt: skip
        events = [{"t": round(t_start + 0.02, 6), "choices": [{"delta": {"role": "assistant"}}]},
                  {"t": t_first, "choices": [{"delta": {"reasoning_content": "Okay"}}]},
                  {"t": round(t_first + 0.012, 6), "choices": [{"delta": {"reasoning_content": ", let"}}]}]  # fmt: skip
        files[f"sse/r{i}.txt"] = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    files["metrics_before.prom"] = _prom(counters)
    drafts, accepted = DRAFTS_PER_BATCH, round(DRAFTS_PER_BATCH * per_draft)
    counters["vllm:prefix_cache_queries_total"] += 4 * PROMPT_TOKENS[domain]
    counters["vllm:prefix_cache_hits_total"] += 4 * CACHED_TOKENS
    counters["vllm:spec_decode_num_drafts_total"] += drafts
    counters["vllm:spec_decode_num_draft_tokens_total"] += drafts * k
    counters["vllm:spec_decode_num_accepted_tokens_total"] += accepted
    files["metrics_after.prom"] = _prom(counters)
    watts = 4 * COMPLETION / tok_j / span  # the domain's energy spread evenly over its batches' time
    times = [start - 2, start - 1, *(start + s for s in range(int(span) + 1)), start + span, start + span + 1]
    rows = ["t,node,gpu_w"]
    for t in times:
        inside = start <= t <= start + span
        for node, share in (("gx10-5428", 0.52), ("gx10-3eda", 0.48)):
            rows.append(f"{t:.6f},{node},{watts * share if inside else 21.5:.6f}")
    files["power.csv"] = "\n".join(rows) + "\n"
    files["trial.json"] = _json({"domain": domain, "trial": trial, "concurrency": 4, "start": start})
    return files


def _arm_files(arm: str) -> dict[str, str]:
    folder, clock, k = ARM_RUNS[arm]
    fixtures = {d: _json({"domain": d, "prompt_tokens": n, "messages": [{"role": "user", "content": f"{d} task"}]})
                for d, n in PROMPT_TOKENS.items()}  # fmt: skip
    files = {f"{folder}/protocol/fixtures/{d}.json": text for d, text in fixtures.items()}
    sums = "".join(f"{hashlib.sha256(t.encode()).hexdigest()}  fixtures/{d}.json\n" for d, t in fixtures.items())
    files[f"{folder}/protocol/fixtures.sha256"] = sums
    files[f"{folder}/protocol/protocol.json"] = _json(
        {"concurrency": 4, "trials": 3, "warmup_tokens": 256, "max_tokens": COMPLETION, "domains": list(PROMPT_TOKENS)}
    )
    files[f"{folder}/environment/snapshot.json"] = _json(
        {
            "image": "vllm/vllm-openai:v0.30.0",
            "image_id": IMAGE_ID,
            "recipe_commit": RECIPE_COMMIT,
            "max_num_seqs": 4,
            "num_speculative_tokens": k,
            "gpu_memory_utilization": 0.8,
            "kv_cache_dtype": "auto",
        }
    )
    # The container's environment as the snapshot kept it: private values included ("review before sharing").
    files[f"{folder}/environment/container_env.txt"] = f"VLLM_USE_V1=1\nHF_TOKEN={FAKE_TOKEN}\n"
    counters = dict.fromkeys(("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                              "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
                              "vllm:spec_decode_num_accepted_tokens_total"), 0.0)  # fmt: skip
    for domain in PROMPT_TOKENS:
        agg, low, high = AB_TABLE[(arm, domain)][:3]
        for trial, rate in enumerate(_trial_rates(agg, low, high), 1):
            counters["vllm:prefix_cache_queries_total"] += 256  # the warm-up before each batch: not measured
            name = f"{folder}/batches/{domain}-c4-t{trial}"
            for rel, text in _batch_files(arm, domain, trial, clock, rate, counters).items():
                files[f"{name}/{rel}"] = text
            clock += 4 * COMPLETION / rate + 30
    return files


def build_extra(dest: Path) -> Path:
    """The serving-benchmark tree beside Marvell_cloud: c4-mtp-ab with both arms' raw results, the summarizer,
    and the report files the summarizer made from them (regenerated here by running it)."""
    import shutil
    import subprocess
    import sys
    import tempfile

    root = dest / SERVING
    staging = Path(tempfile.mkdtemp(prefix=".serving-", dir=dest))
    try:
        ab = staging / AB_DIR
        put(staging / "README.md", "# Qwen3.8-Flash-Next serving recipe: 2026-09-27 benchmark results\n\n"
            "Raw results per run folder; `cd c4-mtp-ab && python3 summarize_c4_mtp_ab.py` regenerates REPORT.md, "
            "comparison.json and summary.json from them.\n")  # fmt: skip
        for arm in ARM_RUNS:
            for rel, text in _arm_files(arm).items():
                put(ab / rel, text)
        put(ab / "summarize_c4_mtp_ab.py", program("summarize_c4_mtp_ab.py"))
        put(ab / "status.json", _json({"state": "complete", "arms": list(ARM_RUNS), "updated": "2026-09-27T16:10Z"}))
        subprocess.run([sys.executable, "-B", "summarize_c4_mtp_ab.py"], cwd=ab, check=True)
        for name in ("REPORT.md", "comparison.json", "summary.json"):
            os.utime(ab / name, (MTIME, MTIME))
        if root.exists():
            shutil.rmtree(root)
        os.replace(staging, root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root
