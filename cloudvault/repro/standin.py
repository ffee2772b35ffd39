"""A deterministic stand-in for the lab's serving harness, for machines with no GPU and no model weights.

Same shape as the harness: `python -m cloudvault.repro.standin --model M --docs DOCS --gpu G --out DIR ...` runs the
GPU's documents in order (warm-up first) and writes per_request.gpuG.csv and requests.gpuG.jsonl (token ids and
t_start/t_first/t_done per request). The "model" is a seeded bigram hash over a Qwen-sized vocabulary: greedy at
temperature 0, so a run repeats exactly. Timings come from a simulated clock whose cost model (TTFT quadratic and
TPOT linear in the prompt length, per engine) sits in the model file, so nothing is slept. A document stops where
its stand-in EOS schedule says (the record's output length), else at the output cap.
VAULT_STANDIN_DIVERGE="DOC:INDEX[:LENGTH]" takes the runner-up token at output INDEX of the document whose id
starts with DOC (a greedy near-tie flip), optionally ending it at LENGTH; VAULT_STANDIN_DELAY=S sleeps S seconds
per request (to test Ctrl-C).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import sys
import time
from pathlib import Path

from cloudvault.atomic import write_text

MASK = (1 << 64) - 1
DIVERGE_ENV = "VAULT_STANDIN_DIVERGE"
DELAY_ENV = "VAULT_STANDIN_DELAY"
COLUMNS = {
    "sparsespec": "idx,doc_id,role,state,temperature,gpu,order,prompt_tokens,output_tokens,ttft_s,tpot_ms,e2e_s,tps,"
    "finish",
    "vllm": "idx,doc_id,role,temperature,prompt_tokens,gpu,output_tokens,ttft_s,tpot_ms,e2e_s,tps,finish",
}
FINISH = {"sparsespec": ("eos", "cap"), "vllm": ("stop", "cap")}


def _mix(x: int) -> int:
    """splitmix64's finaliser: a cheap, well-spread hash of one 64-bit integer."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def generate(model: dict, doc: dict, *, cap: int, temperature: float = 0.0, seed: int = 0,
             diverge: tuple[int, int | None] | None = None) -> tuple[list[int], list[float]]:  # fmt: skip
    """The output token ids of one document and, per token, the logprob margin of the top token over the
    runner-up. diverge: (index, new length or None) takes the runner-up at index."""
    vocab, eos = int(model["vocab"]), int(model["eos_id"])
    head = [int(t) for t in doc.get("prompt_head", [])] or [0, 0]
    prev2, prev = head[-2] if len(head) > 1 else 0, head[-1]
    length = min(int(doc.get("standin_eos_after") or cap), cap)
    rng = random.Random(f"{seed}:{doc['doc_id']}")
    base = _mix(int(model["seed"]) ^ (seed << 32))
    ids, margins = [], []
    for i in range(max(cap, length)):
        h = _mix(base ^ (prev * 0x100000001B3) ^ (prev2 << 17))
        first, second = h % vocab, (h >> 24) % vocab
        margin = ((h >> 44) & 0xFFFF) / 16384  # 0..4 nats
        flip = diverge is not None and i == diverge[0]
        if flip and diverge[1] is not None:
            length = diverge[1]
        if not flip and temperature > 0:
            flip = rng.random() < 1 / (1 + 2.718281828 ** (margin / temperature))
        token = second if flip else first
        if token == eos:
            token = (token + 1) % vocab
        if i == length - 1 and length < cap:
            token = eos
        ids.append(token)
        margins.append(round(margin, 4))
        prev2, prev = prev, token
        if i >= length - 1:
            break
    return ids, margins


def simulated_timings(model: dict, engine: str, prompt_tokens: int, out: int) -> tuple[float, float]:
    """(TTFT seconds, TPOT milliseconds) of the simulated clock for this engine."""
    cost = model["cost"][engine]
    p = prompt_tokens / 100_000
    return cost["ttft"][0] * p + cost["ttft"][1] * p * p, cost["tpot"][0] + cost["tpot"][1] * p


def parse_diverge(text: str | None) -> tuple[str, int, int | None] | None:
    if not text:
        return None
    parts = text.split(":")
    return parts[0], int(parts[1]), int(parts[2]) if len(parts) > 2 else None


def run(args: argparse.Namespace) -> int:
    model = json.loads(Path(args.model).read_text(encoding="utf-8"))
    docs = [json.loads(line) for line in Path(args.docs).read_text(encoding="utf-8").splitlines() if line.strip()]
    mine = [d for d in docs if int(d["gpu"]) == args.gpu]
    diverge = parse_diverge(os.environ.get(DIVERGE_ENV))
    delay = float(os.environ.get(DELAY_ENV, "0"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    clock = time.time()
    rows, records = [], []
    for doc in mine:
        flip = (diverge[1], diverge[2]) if diverge and doc["doc_id"].startswith(diverge[0]) else None
        ids, margins = generate(model, doc, cap=args.output_cap, temperature=args.temperature, seed=args.seed,
                                diverge=flip)  # fmt: skip
        ttft, tpot = simulated_timings(model, args.engine, int(doc["prompt_tokens"]), len(ids))
        t_first = clock + ttft
        t_done = t_first + tpot / 1000 * (len(ids) - 1)
        record = {"request": f"{doc['doc_id']}@gpu{args.gpu}", "doc_id": doc["doc_id"], "gpu": args.gpu,
                  "t_start": round(clock, 3), "t_first": round(t_first, 3), "t_done": round(t_done, 3),
                  "output_ids": ids}  # fmt: skip
        if args.record_logprobs:
            record["top2_margin"] = margins
        records.append(record)
        rows.append(_row(args, doc, len(ids), ttft, tpot, t_done - clock))
        print(f"[gpu{args.gpu}] {doc['doc_id'][:8]} {doc.get('role', '')} prompt {doc['prompt_tokens']} out {len(ids)} "
              f"ttft {ttft:.2f}s tpot {tpot:.2f}ms", flush=True)  # fmt: skip
        clock = t_done
        time.sleep(delay)
    _write_outputs(out, args, rows, records)
    return 0


def _row(args, doc: dict, out: int, ttft: float, tpot: float, e2e: float) -> dict:
    finish = FINISH[args.engine][1 if out >= args.output_cap else 0]
    return {"idx": doc.get("idx", ""), "doc_id": doc["doc_id"], "role": doc.get("role", "measured"), "state": "완료",
            "temperature": f"{args.temperature:g}", "gpu": args.gpu, "order": doc.get("order", ""),
            "prompt_tokens": doc["prompt_tokens"], "output_tokens": out, "ttft_s": f"{ttft:.2f}",
            "tpot_ms": f"{tpot:.2f}", "e2e_s": f"{e2e:.1f}", "tps": f"{out / e2e:.2f}", "finish": finish}  # fmt: skip


def _write_outputs(out: Path, args, rows: list[dict], records: list[dict]) -> None:
    """Each file under a temp name, renamed into place: a killed runner leaves no half table."""
    columns = COLUMNS[args.engine].split(",")
    table = io.StringIO()
    writer = csv.DictWriter(table, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(out / f"per_request.gpu{args.gpu}.csv", table.getvalue())
    write_text(out / f"requests.gpu{args.gpu}.jsonl", "".join(json.dumps(r) + "\n" for r in records))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="standin", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--docs", required=True, help="documents as JSON lines (doc_id, role, gpu, order, prompt_tokens)")
    p.add_argument("--gpu", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--engine", choices=sorted(COLUMNS), default="sparsespec")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-cap", type=int, default=8192)
    p.add_argument("--record-logprobs", action="store_true", help="also write each token's top-2 logprob margin")
    # The harness's engine settings: accepted so the command lines match, recorded, not simulated.
    for flag in ("--spec-stride", "--budget-ratio", "--num-min-budget", "--chunk", "--clip-length", "--batch",
                 "--kv-cache", "--admit-policy", "--mem-fraction", "--max-model-len", "--block-size",
                 "--prefix-caching", "--max-num-batched-tokens"):  # fmt: skip
        p.add_argument(flag)
    return p


if __name__ == "__main__":
    sys.exit(run(parser().parse_args()))
