"""The demo's reproduction material: 014/013 inputs and token ids, 016's plots, 017's bundle, and a serving-benchmark
result tree (seed 001) as a second mirror beside Marvell_cloud.

014's first run and its rep2 carry per-request token ids made by the stand-in model (`cloudvault.repro.standin`)
from the recorded per-request table: every request ends at its recorded length, and rep2's doc 670bf1c4 takes the
runner-up token at output 1,498 and ends at 1,855 (the record's 1,956 / 1,855), so rep2 vs rep1 is 23 of 24
identical. Timestamps are rebuilt from the recorded TTFT/TPOT; rep2's are jittered by under 1%.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import zstandard

from cloudvault.demo.build import MTIME
from cloudvault.index.definition import manifest_table
from cloudvault.repro import standin

E014 = "014_ss20_temp0_chunk1024"
E013 = "013_vanilla126_temp0_cap8192"
REP1 = f"{E014}/data/20260925_070231"
REP2 = f"{E014}/data/ss20_temp0_c1024_rep2/20260925_072725"
RUN_013 = f"{E013}/data/20260925_061459"
MODEL_PATH = "_repro/standin/tiny-qwen3-30b-a3b.json"
DIVERGED_DOC, DIVERGED_AT, DIVERGED_LENGTH = "670bf1c4bb02136c067d2341", 1498, 1855
START_014 = 1790287351.0  # 2026-09-25 07:02:31 KST, the first run's folder name
START_013 = 1790283299.0  # 2026-09-25 06:14:59 KST

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


def _requests(docs: list[dict], rows: dict, start: float, *, jitter: float = 0.0, rep2: bool = False) -> list[dict]:
    """The token ids and timestamps of every request of one run, rebuilt from its per-request table."""
    clocks: dict[int, float] = {}
    records = []
    for doc in docs:
        row = rows[(doc["doc_id"], doc["gpu"])]
        diverge = (DIVERGED_AT, DIVERGED_LENGTH) if rep2 and doc["doc_id"] == DIVERGED_DOC else None
        ids, _ = standin.generate(STANDIN_MODEL, doc, cap=8192, diverge=diverge)
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


def build(tree: Path) -> None:
    """Add the reproduction material to the staged Marvell_cloud tree."""
    build_014_013(tree)
