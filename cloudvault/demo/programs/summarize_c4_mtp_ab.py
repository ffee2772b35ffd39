"""Regenerate the C4 MTP3 vs MTP2 A/B report from stored results alone (no server is contacted).

Per arm and domain, over the measured batches: output tok/s = completion tokens / batch span (first request start
to last response end), summed as tokens / summed spans; input tok/s the same with prompt tokens (cache hits
included); TTFT = first non-empty reasoning or content delta in the SSE stream minus the request start; GPU
energy = both nodes' power samples integrated (trapezoid) over each batch span, tok/J = tokens / energy; input
cache-hit rate and draft acceptance from the before/after .prom counter deltas of each batch.
"""

import glob
import hashlib
import json
import os
import statistics

ARMS = {"mtp3": "mtp3/results/c4-mtp3-20260927T064349Z", "mtp2": "mtp2/results/c4-mtp2-20260927T070232Z"}
DOMAINS = ("english", "coding")


def prom(path):
    values = {}
    for line in read_lines(path):
        if line.strip() and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name.split("{")[0]] = float(value)  # counters carry a model_name label
    return values


def read_text(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def read_lines(path):
    with open(path, encoding="utf-8") as fh:
        return list(fh)


def ttft(sse_path, t_start):
    for line in read_lines(sse_path):
        if not line.startswith("data: {"):
            continue
        event = json.loads(line[6:])
        delta = event["choices"][0]["delta"]
        if delta.get("reasoning_content") or delta.get("content"):
            return event["t"] - t_start
    raise ValueError(f"{sse_path}: no token")


def energy(power_path, start, end):
    samples = [
        tuple(map(float, line.split(",")[0::2])) + (line.split(",")[1],)
        for line in read_text(power_path).splitlines()[1:]
    ]
    joules = 0.0
    for node in sorted({s[2] for s in samples}):
        points = [(t, w) for t, w, n in samples if n == node and start <= t <= end]
        joules += sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(points, points[1:], strict=False))
    return joules


def batch(folder):
    responses = [json.loads(read_text(p)) for p in sorted(glob.glob(f"{folder}/responses/*.json"))]
    start = min(r["t_start"] for r in responses)
    end = max(r["t_end"] for r in responses)
    before, after = prom(f"{folder}/metrics_before.prom"), prom(f"{folder}/metrics_after.prom")
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    ttfts = [
        ttft(f"{folder}/sse/{os.path.basename(p)[:-5]}.txt", r["t_start"])
        for p, r in zip(sorted(glob.glob(f"{folder}/responses/*.json")), responses, strict=True)
    ]
    return {
        "span": end - start,
        "tokens": sum(r["usage"]["completion_tokens"] for r in responses),
        "prompt": sum(r["usage"]["prompt_tokens"] for r in responses),
        "ttfts": ttfts,
        "joules": energy(f"{folder}/power.csv", start, end),
        "delta": delta,
    }


def fixtures_ok(arm_dir):
    for line in read_lines(f"{arm_dir}/protocol/fixtures.sha256"):
        digest, name = line.split()
        with open(f"{arm_dir}/protocol/{name}", "rb") as fh:
            if hashlib.sha256(fh.read()).hexdigest() != digest:
                return False
    return True


def cell(batches):
    tokens, span = sum(b["tokens"] for b in batches), sum(b["span"] for b in batches)
    d = {k: sum(b["delta"].get(k, 0.0) for b in batches) for k in batches[0]["delta"]}
    rates = [b["tokens"] / b["span"] for b in batches]
    return {
        "batches": len(batches),
        "requests": 4 * len(batches),
        "output_tokens": tokens,
        "output_tok_s": round(tokens / span, 2),
        "range_tok_s": [round(min(rates), 2), round(max(rates), 2)],
        "input_tok_s": round(sum(b["prompt"] for b in batches) / span, 2),
        "ttft_median_s": round(statistics.median(t for b in batches for t in b["ttfts"]), 3),
        "gpu_energy_j": round(sum(b["joules"] for b in batches), 1),
        "tok_per_j": round(tokens / sum(b["joules"] for b in batches), 3),
        "cache_hit_rate": round(d["vllm:prefix_cache_hits_total"] / d["vllm:prefix_cache_queries_total"], 4),
        "acceptance_rate": round(
            d["vllm:spec_decode_num_accepted_tokens_total"] / d["vllm:spec_decode_num_draft_tokens_total"], 4
        ),
        "accepted_per_draft": round(
            d["vllm:spec_decode_num_accepted_tokens_total"] / d["vllm:spec_decode_num_drafts_total"], 3
        ),
    }


def main():
    summary = {"arms": {}, "fixtures_verified": True}
    for arm, folder in ARMS.items():
        summary["fixtures_verified"] &= fixtures_ok(folder)
        summary["arms"][arm] = {
            d: cell([batch(f) for f in sorted(glob.glob(f"{folder}/batches/{d}-c4-t*"))]) for d in DOMAINS
        }
    comparison = {
        d: {
            "output_tok_s_pct": round(
                (summary["arms"]["mtp2"][d]["output_tok_s"] / summary["arms"]["mtp3"][d]["output_tok_s"] - 1) * 100, 1
            ),
            "tok_per_j_pct": round(
                (summary["arms"]["mtp2"][d]["tok_per_j"] / summary["arms"]["mtp3"][d]["tok_per_j"] - 1) * 100, 1
            ),
        }
        for d in DOMAINS
    }
    with open("summary.json", "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=2, sort_keys=True)
        fh.write("\n")
    with open("comparison.json", "w", encoding="utf-8") as fh:
        json.dump(comparison, fh, indent=2, sort_keys=True)
        fh.write("\n")
    with open("REPORT.md", "w", encoding="utf-8") as fh:
        fh.write(report(summary, comparison))


def report(summary, comparison):
    cols = [(d, a) for d in DOMAINS for a in ("mtp3", "mtp2")]
    rows = [
        ("output tok/s", lambda c: f"{c['output_tok_s']:.2f}"),
        ("3-trial range tok/s", lambda c: f"{c['range_tok_s'][0]:.2f}-{c['range_tok_s'][1]:.2f}"),
        ("input tok/s, cache incl.", lambda c: f"{c['input_tok_s']:.2f}"),
        ("TTFT median (s)", lambda c: f"{c['ttft_median_s']:.3f}".lstrip("0")),
        ("GPU output tok/J", lambda c: f"{c['tok_per_j']:.3f}"),
        ("input cache hit rate", lambda c: f"{c['cache_hit_rate'] * 100:.2f}%"),
        ("draft acceptance", lambda c: f"{c['acceptance_rate'] * 100:.2f}%"),
        ("accepted tokens per draft", lambda c: f"{c['accepted_per_draft']:.3f}"),
    ]
    lines = [
        "# C4 fixed MTP3 vs MTP2",
        "",
        "| metric | " + " | ".join(f"{d} {a.upper()}" for d, a in cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    lines += [f"| {name} | " + " | ".join(fmt(summary["arms"][a][d]) for d, a in cols) + " |" for name, fmt in rows]
    lines.append("")
    for d in DOMAINS:
        c = comparison[d]
        lines.append(f"- {d} MTP2: throughput {c['output_tok_s_pct']:+.1f}%, GPU efficiency {c['tok_per_j_pct']:+.1f}%")
    lines.append(f"- fixtures verified: {'yes' if summary['fixtures_verified'] else 'NO'}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
