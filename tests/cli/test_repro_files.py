"""Plot and report recipes that really run: 016's plot_tps.py, 017's make_bundle.sh + redraw.sh, and the serving
benchmark's summarize_c4_mtp_ab.py regenerate their recorded files from stored results alone, byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import require


def repro(vault, db: Path, recipe: str, out: Path, *extra: str):
    return vault("--catalog", str(db), "repro", recipe, "--out", str(out), *extra)


def test_016_plots_are_redrawn_byte_identical(demo_catalog, vault, tmp_path):
    result = repro(vault, demo_catalog, "016_plots", tmp_path / "runs")
    assert result.code == 0, result.err
    assert "REPRODUCED: outputs 6/6 files identical" in result.out
    (folder,) = (tmp_path / "runs").iterdir()
    assert (folder / "work/figs/tps_by_context.svg").read_text().startswith("<svg")
    assert "ss20_temp0,140-160K,6," in (folder / "work/plot_data/tps_by_context.csv").read_text()
    csv = (folder / "compare.csv").read_text().splitlines()
    assert csv[0] == "name,verdict,first_difference,size_a,size_b" and len(csv) == 7


def test_017_redraw_notices_a_changed_run_summary(demo_mirror, vault, tmp_path):
    require("sh")
    mirror = tmp_path / "Marvell_cloud"
    shutil.copytree(demo_mirror, mirror, symlinks=True)
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "--mirror", "marvell_cloud", "--quiet", str(mirror)).code == 0
    assert "REPRODUCED: outputs 3/3 files identical" in repro(vault, db, "017_redraw", tmp_path / "a").out
    summary = mirror / "017_runpod_pro6000_workspace_mirror/data/workspace/cs/run/qwen3_4b_b32/summary.csv"
    summary.write_text(summary.read_text().replace("1502.4", "1502.5"))
    assert vault("--catalog", str(db), "index", "--quiet", str(mirror)).code == 0
    result = repro(vault, db, "017_redraw", tmp_path / "b", "--json")
    assert result.code == 10, result.err
    doc = json.loads(result.out)
    assert (doc["verdict"], doc["identical"], doc["compared"]) == ("OUTPUTS_DIVERGED", 1, 3)
    first = "run,batch,requests,output_tokens,stable_tps,e2e_tps\nqwen3_4b_b16,16,64,1203388,980.1,912.4\n"
    offset = len(first) + len("qwen3_4b_b32,32,128,2391045,1502.")
    assert f"bundle/results.csv diverged at byte {offset}" in doc["reasons"]
    assert "figs/tps_by_batch.csv diverged at byte" in " ".join(doc["reasons"])


@pytest.fixture
def serving_catalog(demo_catalog, demo_mirror, vault) -> Path:
    from cloudvault.demo.serving import SERVING

    result = vault("--catalog", str(demo_catalog), "index", "--quiet", str(demo_mirror.parent / SERVING))
    assert result.code == 0, result.err
    return demo_catalog


# Section 8 of the report (seed 001): en MTP3, en MTP2, coding MTP3, coding MTP2
SEED_TABLE = {
    "output_tok_s": (113.54, 117.07, 138.98, 135.93),
    "range_tok_s": ([111.70, 116.42], [115.56, 117.87], [132.93, 150.80], [134.11, 137.14]),
    "input_tok_s": (59.65, 61.51, 72.82, 71.22),
    "ttft_median_s": (0.568, 0.554, 0.572, 0.561),
    "tok_per_j": (3.427, 3.592, 4.136, 4.107),
    "cache_hit_rate": (0.7732, 0.7732, 0.7754, 0.7754),
    "acceptance_rate": (0.4369, 0.5000, 0.5998, 0.6910),
    "accepted_per_draft": (1.311, 1.000, 1.799, 1.382),
}


def test_the_serving_report_is_regenerated_from_stored_results_and_matches_the_seed(serving_catalog, vault, tmp_path):
    result = repro(vault, serving_catalog, "serving_c4_mtp_ab", tmp_path / "runs")
    assert result.code == 0, result.err
    assert "REPRODUCED: outputs 3/3 files identical" in result.out
    (folder,) = (tmp_path / "runs").iterdir()
    summary = json.loads((folder / "work/summary.json").read_text())
    cells = [summary["arms"][a][d] for d, a in (("english", "mtp3"), ("english", "mtp2"), ("coding", "mtp3"),
                                                 ("coding", "mtp2"))]  # fmt: skip
    for metric, expected in SEED_TABLE.items():
        assert tuple(c[metric] for c in cells) == tuple(expected), metric
    assert all(c["output_tokens"] == 24576 and c["batches"] == 3 for c in cells)
    assert summary["fixtures_verified"] is True
    comparison = json.loads((folder / "work/comparison.json").read_text())
    assert comparison == {"english": {"output_tok_s_pct": 3.1, "tok_per_j_pct": 4.8},
                          "coding": {"output_tok_s_pct": -2.2, "tok_per_j_pct": -0.7}}  # fmt: skip
    from cloudvault.demo.build import FAKE_TOKEN

    assert list(folder.rglob("snapshot.json")) and not list(folder.rglob("container_env.txt"))  # flagged: not staged
    assert not [p for p in folder.rglob("*") if p.is_file() and FAKE_TOKEN.encode() in p.read_bytes()]
    runs = vault("--catalog", str(serving_catalog), "runs", "c4-mtp-ab")
    assert "serving_c4_mtp_ab-" in runs.out and "REPRODUCED" in runs.out


def test_the_summarizer_reads_the_prom_deltas(serving_catalog, demo_mirror, vault, tmp_path):
    """A changed counter in one stored .prom snapshot changes the regenerated cache-hit rate: DIVERGED."""
    from cloudvault.demo.serving import SERVING

    mirror = tmp_path / SERVING
    shutil.copytree(demo_mirror.parent / SERVING, mirror)
    prom = next(mirror.glob("c4-mtp-ab/mtp2/results/*/batches/coding-c4-t2/metrics_after.prom"))
    text = prom.read_text()
    line = next(x for x in text.splitlines() if x.startswith("vllm:prefix_cache_hits_total"))
    name, value = line.rsplit(" ", 1)
    prom.write_text(text.replace(line, f"{name} {float(value) - 400:.1f}"))
    db = tmp_path / "c.db"
    assert vault("--catalog", str(db), "index", "--quiet", str(mirror)).code == 0
    result = repro(vault, db, "serving_c4_mtp_ab", tmp_path / "runs", "--json")
    assert result.code == 10
    reasons = json.loads(result.out)["reasons"]
    assert [r.split(" diverged")[0] for r in reasons] == ["REPORT.md", "summary.json"]
    (folder,) = (tmp_path / "runs").iterdir()
    summary = json.loads((folder / "work/summary.json").read_text())
    assert summary["arms"]["mtp2"]["coding"]["cache_hit_rate"] == round((3 * 4 * 832 - 400) / (3 * 4 * 1073), 4)
