"""The verdicts of the H200 re-runs (bench/repro_h200/runs/, made by device_run.sh), recomputed from the files:
`python bench/repro_h200/verdicts.py [--json]`. Each recipe's A and baselines are runs of A's kind made alone on
the GPU; every other run is judged as B against them, as `vault compare A B --baseline ...` judges it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cloudvault.repro import report, results
from cloudvault.repro.compare import compare_runs
from cloudvault.repro.recipe import load

HERE = Path(__file__).resolve().parent / "runs"
# recipe -> (folder, A, baselines): the smoke recipe's record is from another day, so today's first 3 runs are A's
# kind; the bound recipe's A and baselines are its record (record_rep1..3, shipped as its recorded folders)
PLAN = {
    "gpu_greedy_smoke": ("smoke", "alone_01", ("alone_02", "alone_03")),
    "gpu_bound_decode": ("bound", "record_rep1", ("record_rep2", "record_rep3")),
}


def rows(folder: Path) -> dict:
    return results.parse(results.read_folder(folder), str(folder))


def verdicts() -> list[dict]:
    found = []
    for name, (sub, a_name, base_names) in PLAN.items():
        recipe = load(name)
        rules, _, margin = recipe.compare_config()
        a = rows(HERE / sub / a_name)
        baselines = [rows(HERE / sub / n) for n in base_names]
        for b_dir in sorted(p for p in (HERE / sub).iterdir() if p.is_dir()):
            if b_dir.name in (a_name, *base_names):
                continue
            cmp = compare_runs(a, rows(b_dir), rules, near_tie_margin=margin, baselines=baselines,
                               floors=recipe.noise_floors())  # fmt: skip
            named = [t.label for t in cmp.timings.values() if t.verdict in ("slower", "faster")]
            found.append({"recipe": name, "run": b_dir.name, "busy": b_dir.name.startswith("busy"),
                          "verdict": cmp.verdict, "changed": named, "headline": report.headline(cmp),
                          "ratios": {m: round(t.ratio, 3) for m, t in cmp.timings.items() if t.ratio}})  # fmt: skip
    return found


if __name__ == "__main__":
    found = verdicts()
    if "--json" in sys.argv:
        print(json.dumps(found, indent=1))
    for v in found:
        print(f"{v['recipe']:<17} {v['run']:<9} {v['verdict']:<16} {' '.join(v['changed']) or '-':<24} "
              f"TTFT x{v['ratios'].get('ttft')} TPOT x{v['ratios'].get('tpot')} E2E x{v['ratios'].get('e2e')}")
