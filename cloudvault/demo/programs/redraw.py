"""Stable and end-to-end tok/s per batch size from a results bundle: figs/tps_by_batch.{csv,svg}."""

import csv
import sys

bundle, figs = sys.argv[1], sys.argv[2]
with open(bundle, encoding="utf-8") as fh:
    rows = sorted(csv.DictReader(fh), key=lambda r: int(r["batch"]))
with open(f"{figs}/tps_by_batch.csv", "w", encoding="utf-8", newline="") as fh:
    out = csv.writer(fh, lineterminator="\n")
    out.writerow(["batch", "stable_tps", "e2e_tps", "stable_per_request"])
    for r in rows:
        out.writerow([r["batch"], r["stable_tps"], r["e2e_tps"], f"{float(r['stable_tps']) / int(r['batch']):.2f}"])
top = max(float(r["stable_tps"]) for r in rows)
svg = [
    '<svg xmlns="http://www.w3.org/2000/svg" width="480" height="300">',
    '<text x="240" y="18" text-anchor="middle" font-size="14">Qwen3-4B RunPod sweep: stable tok/s</text>',
]
for i, r in enumerate(rows):
    h = 220 * float(r["stable_tps"]) / top
    svg.append(f'<rect x="{60 + i * 130}" y="{260 - h:.1f}" width="80" height="{h:.1f}" fill="#4c72b0"/>')
    svg.append(f'<text x="{100 + i * 130}" y="278" text-anchor="middle" font-size="11">b{r["batch"]}</text>')
svg.append("</svg>")
with open(f"{figs}/tps_by_batch.svg", "w", encoding="utf-8") as fh:
    fh.write("\n".join(svg) + "\n")
