"""A real GPU reproduction in miniature: greedy decoding with torch and transformers of a small Llama built from a
config with a fixed seed (no weights exist to download), over a handful of seeded prompts, written in the shape of
the lab's harness output so `vault repro gpu_greedy_smoke` and `vault compare` read it like any recorded run.

`python -m cloudvault.repro.gpu_smoke --out DIR [--device cuda|cpu]` writes a recorded folder into DIR:
per_request.csv (the harness's table: prompt/output tokens, TTFT, TPOT, E2E, tok/s, finish), requests.jsonl (per
request: output_ids, t_start/t_first/t_done, top2_margin) and run.json (what it ran on: GPU name and compute
capability, torch, transformers, dtype, seed). With `--gpu G` (as `vault repro` runs it, one process per GPU) the
names carry the slot, per_request.gpuG.csv etc., and vault merges them. TTFT = t_first - t_start, TPOT =
(t_done - t_first) / (out - 1), E2E = t_done - t_start, as the lab computes them (cloudvault.repro.metrics).
The first prompt is a warm-up (CUDA context, kernels) and is not measured.

`--profile bound` (recipe gpu_bound_decode) runs a seeded Llama of about 8.6 B parameters in bfloat16 instead,
big enough that each decode step reads ~17 GB of weights, so the GPU's memory bandwidth, not kernel launches,
sets TPOT. Its outputs repeat on one GPU: fixed shapes (batch 1, no padding), deterministic algorithms with
CUBLAS_WORKSPACE_CONFIG, and the last hidden state projected to logits and argmaxed in float32.
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

SEED = 20251203
MAX_NEW_TOKENS = 32
PROMPT_LENGTHS = (16, 32, 96, 256, 384, 64)  # the first one is the warm-up
MODEL_CONFIG = {
    "vocab_size": 4096, "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
    "num_attention_heads": 8, "num_key_value_heads": 4, "max_position_embeddings": 1024,
    "initializer_range": 0.35, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
    "bos_token_id": 1, "eos_token_id": 2,
}  # fmt: skip
# initializer_range well above the default 0.02 gives peaked logits, so greedy decoding meets few near-ties
# the GPU-bound profile: the same Llama family widened to ~8.6 B parameters in bf16 (17 GB read per decoded token),
# with the same small vocabulary and special tokens
BOUND_CONFIG = MODEL_CONFIG | {
    "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 10, "num_attention_heads": 64,
    "num_key_value_heads": 8, "max_position_embeddings": 2048, "initializer_range": 0.2, "rms_norm_eps": 1e-5,
}  # fmt: skip
PROFILES = {
    "smoke": {"config": MODEL_CONFIG, "dtype": "float32", "prompts": PROMPT_LENGTHS, "max_new_tokens": MAX_NEW_TOKENS},
    "bound": {"config": BOUND_CONFIG, "dtype": "bfloat16", "prompts": (32, 64, 96, 128, 192, 256, 384, 512, 768),
              "max_new_tokens": 32},
}  # fmt: skip
COLUMNS = ["idx", "doc_id", "role", "temperature", "prompt_tokens", "gpu", "output_tokens", "ttft_s", "tpot_ms",
           "e2e_s", "tps", "finish"]  # fmt: skip


def prompts(seed: int = SEED, lengths: tuple[int, ...] = PROMPT_LENGTHS, vocab: int = MODEL_CONFIG["vocab_size"]
            ) -> list[dict]:  # fmt: skip
    """The prompts: seeded token ids (no tokenizer to download), warm-up first; a doc id per prompt."""
    rng = random.Random(seed)
    found = []
    for i, length in enumerate(lengths):
        ids = [1] + [rng.randrange(3, vocab) for _ in range(length - 1)]
        found.append({"idx": i, "doc_id": f"p{i}-{length:03d}", "role": "warmup" if i == 0 else "measured",
                      "prompt_ids": ids})  # fmt: skip
    return found


def build_model(device: str, config: dict = MODEL_CONFIG, dtype: str = "float32"):
    """The seeded Llama in dtype, in eval mode, on the device (same seed -> same weights on the same device).
    The tiny float32 one is built on the CPU and moved; a bfloat16 one is built on the device, in bfloat16, at once
    (8 B parameters would take minutes to initialise on the host)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    if dtype == "float32":
        model = LlamaForCausalLM(LlamaConfig(**config))
        return model.to(device=device, dtype=torch.float32).eval()
    default = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        with torch.device(device):
            model = LlamaForCausalLM(LlamaConfig(**config))
    finally:
        torch.set_default_dtype(default)
    model = model.eval()
    model.lm_head_fp32 = model.lm_head.weight.detach().float()  # logits and argmax in float32: see greedy()
    return model


def greedy(model, prompt_ids: list[int], device: str, max_new_tokens: int = MAX_NEW_TOKENS) -> dict:
    """One request: greedy tokens with the KV cache, wall-clock timestamps (each token's id read back to the host,
    so the GPU has finished it), and each step's top-1 minus top-2 logprob margin. A model with lm_head_fp32 (the
    bf16 one) projects only the last position's hidden state, in float32, so argmax never sees bf16 ties."""
    import torch

    eos = model.config.eos_token_id
    fp32_head = getattr(model, "lm_head_fp32", None)
    ids, margins = [], []
    with torch.inference_mode():
        t_start = time.time()
        tokens = torch.tensor([prompt_ids], device=device)
        past, t_first = None, None
        for _ in range(max_new_tokens):
            if fp32_head is None:
                out = model(input_ids=tokens, past_key_values=past, use_cache=True)
                logits = out.logits[0, -1].float()
            else:
                out = model.model(input_ids=tokens, past_key_values=past, use_cache=True)
                logits = out.last_hidden_state[0, -1].float() @ fp32_head.T
            past = out.past_key_values
            logprobs = torch.log_softmax(logits, dim=-1)
            top = torch.topk(logprobs, 2)
            token = int(top.indices[0].item())
            margins.append(round(float(top.values[0] - top.values[1]), 4))
            ids.append(token)
            t_first = t_first or time.time()
            if token == eos:
                break
            tokens = torch.tensor([[token]], device=device)
        t_done = time.time()
    return {"t_start": t_start, "t_first": t_first, "t_done": t_done, "output_ids": ids, "top2_margin": margins}


def device_settings(device: str, profile: str = "smoke") -> dict:
    """What the run ran on, as settings a comparison checks: the GPU (name, compute capability) or 'none (cpu)'."""
    import torch
    import transformers

    if device.startswith("cuda"):
        index = torch.device(device).index or 0
        major, minor = torch.cuda.get_device_capability(index)
        gpu = f"{torch.cuda.get_device_name(index)} ({major}.{minor})"
    else:
        gpu = "none (cpu)"
    p = PROFILES[profile]
    found = {"gpu": gpu, "dtype": p["dtype"], "seed": SEED, "max_new_tokens": p["max_new_tokens"],
             "model_config": json.dumps(p["config"], sort_keys=True), "torch": torch.__version__,
             "transformers": transformers.__version__}  # fmt: skip
    if profile != "smoke":  # the smoke record's settings stay exactly as recorded
        found["profile"] = profile
    return found


def run(args: argparse.Namespace) -> int:
    # deterministic cuBLAS and no TF32: greedy on one GPU must repeat token for token
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    # warn_only: an op with no deterministic CUDA kernel in some torch version warns instead of ending the run
    torch.use_deterministic_algorithms(True, warn_only=True)
    profile = PROFILES[args.profile]
    if args.device == "cpu":
        torch.set_num_threads(1)  # one thread: the same reduction order every run, and no fight for shared cores
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_smoke: --device cuda but torch sees no GPU (use --device cpu)", file=sys.stderr)
        return 6
    model = build_model(args.device, profile["config"], profile["dtype"])
    rows, records, slot = [], [], args.gpu or 0
    for doc in prompts(SEED, profile["prompts"], profile["config"]["vocab_size"]):
        done = greedy(model, doc["prompt_ids"], args.device, profile["max_new_tokens"])
        out = len(done["output_ids"])
        records.append({"request": f"{doc['doc_id']}@gpu{slot}", "doc_id": doc["doc_id"], "gpu": slot,
                        **{k: round(done[k], 6) for k in ("t_start", "t_first", "t_done")},
                        "output_ids": done["output_ids"], "top2_margin": done["top2_margin"]})  # fmt: skip
        rows.append(table_row(doc, slot, out, done, profile["config"]["eos_token_id"]))
        print(f"[gpu{slot}] {doc['doc_id']} {doc['role']} prompt {len(doc['prompt_ids'])} out {out} "
              f"ttft {rows[-1]['ttft_s']}s tpot {rows[-1]['tpot_ms']}ms", flush=True)  # fmt: skip
    write_outputs(Path(args.out), args.gpu, rows, records, device_settings(args.device, args.profile))
    return 0


def table_row(doc: dict, gpu: int, out: int, done: dict, eos: int = MODEL_CONFIG["eos_token_id"]) -> dict:
    from cloudvault.repro.metrics import request_timings

    t = request_timings(done["t_start"], done["t_first"], done["t_done"], out)
    finish = "stop" if done["output_ids"][-1] == eos else "cap"
    return {"idx": doc["idx"], "doc_id": doc["doc_id"], "role": doc["role"], "temperature": "0",
            "prompt_tokens": len(doc["prompt_ids"]), "gpu": gpu, "output_tokens": out,
            "ttft_s": f"{t['ttft_s']:.4f}", "tpot_ms": f"{t['tpot_ms']:.3f}", "e2e_s": f"{t['e2e_s']:.4f}",
            "tps": f"{out / t['e2e_s']:.1f}", "finish": finish}  # fmt: skip


def write_outputs(out: Path, gpu: int | None, rows: list[dict], records: list[dict], settings: dict) -> None:
    """Each file under a temp name, renamed into place: a killed runner leaves no half table."""
    out.mkdir(parents=True, exist_ok=True)
    slot = "" if gpu is None else f".gpu{gpu}"
    table = io.StringIO()
    writer = csv.DictWriter(table, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(out / f"per_request{slot}.csv", table.getvalue())
    write_text(out / f"requests{slot}.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    write_text(out / f"run{slot}.json", json.dumps({"settings": settings}, indent=1, sort_keys=True) + "\n")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu_smoke", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for per_request/requests/run files (made if missing)")
    p.add_argument("--device", default="cuda", help="cuda (the GPU CUDA_VISIBLE_DEVICES gives) or cpu")
    p.add_argument("--gpu", type=int, help="the GPU slot, in the request ids and file names (default: a record)")
    p.add_argument("--profile", choices=sorted(PROFILES), default="smoke",
                   help="smoke: the tiny launch-bound float32 Llama; bound: an ~8.6 B bf16 one the GPU sets")
    return p


if __name__ == "__main__":
    sys.exit(run(parser().parse_args()))
