"""Per 20K-token context bin: TPS, TTFT and TPOT medians (p25-p75) of every measured request, per system.

Reads RTXPRO6000/longcontext/*/per_request.csv; writes plot_data/*_by_context.csv and figs/*_by_context.svg.
"""

import csv
import glob
import os

from plot_style import bars_svg, quantile

BIN = 20_000
METRICS = (("tps", "tps", "output tok/s"), ("ttft_s", "ttft", "TTFT (s)"), ("tpot_ms", "tpot", "TPOT (ms)"))


def load():
    systems = {}
    for path in sorted(glob.glob("RTXPRO6000/longcontext/*/per_request.csv")):
        with open(path, encoding="utf-8") as fh:
            rows = [r for r in csv.DictReader(fh) if r["role"] == "measured"]
        systems[os.path.basename(os.path.dirname(path))] = rows
    return systems


def main():
    systems = load()
    bins = sorted({int(r["prompt_tokens"]) // BIN for rows in systems.values() for r in rows})
    labels = [f"{b * 20}-{b * 20 + 20}K" for b in bins]
    os.makedirs("plot_data", exist_ok=True)
    os.makedirs("figs", exist_ok=True)
    for column, name, title in METRICS:
        series = {}
        with open(f"plot_data/{name}_by_context.csv", "w", encoding="utf-8", newline="") as fh:
            out = csv.writer(fh, lineterminator="\n")
            out.writerow(["system", "bin", "n", "median", "p25", "p75"])
            for system, rows in systems.items():
                series[system] = []
                for b, label in zip(bins, labels, strict=True):
                    values = [float(r[column]) for r in rows if int(r["prompt_tokens"]) // BIN == b]
                    if not values:
                        series[system].append(None)
                        continue
                    med = quantile(values, 0.5)
                    series[system].append(med)
                    out.writerow(
                        [
                            system,
                            label,
                            len(values),
                            f"{med:.3f}",
                            f"{quantile(values, 0.25):.3f}",
                            f"{quantile(values, 0.75):.3f}",
                        ]
                    )
        bars_svg(f"figs/{name}_by_context.svg", f"{title} by context (median)", labels, series)


if __name__ == "__main__":
    main()
