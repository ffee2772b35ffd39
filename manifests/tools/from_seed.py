"""Rebuild the per-request tables of 013 and 014 from the dashboard seed (its cells are run together)."""

import csv
import re
import sys
from pathlib import Path

INT = r"\d{1,3}(?:,\d{3})*"
TABLES = {
    # section header, first column names, csv name, field patterns after the doc id
    "014": (
        "3.5.8",
        [
            "role",
            "state",
            "temperature",
            "gpu",
            "order",
            "prompt_tokens",
            "output_tokens",
            "ttft_s",
            "tpot_ms",
            "e2e_s",
            "tps",
            "finish",
        ],
        [
            r"measured|warmup",
            r"완료",
            r"0",
            r"\d",
            r"\d/\d",
            INT,
            INT,
            r"\d+\.\d\d",
            r"\d+\.\d\d",
            r"\d+\.\d",
            r"\d+\.\d\d",
            r"[a-z]+",
        ],
    ),
    "013": (
        "3.6.7",
        ["role", "temperature", "prompt_tokens", "gpu", "output_tokens", "ttft_s", "tpot_ms", "e2e_s", "tps", "finish"],
        [r"measured|warmup", r"0", INT, r"\d", INT, r"\d+\.\d\d", r"\d+\.\d\d", r"\d+\.\d", r"\d+\.\d\d", r"[a-z]+"],
    ),
}


def splits(text: str, patterns: list[str]):
    """Every way to cut text into consecutive fields matching patterns, in order."""
    if not patterns:
        if not text:
            yield []
        return
    for n in range(len(text), 0, -1):
        head = text[:n]
        if re.fullmatch(patterns[0], head):
            for rest in splits(text[n:], patterns[1:]):
                yield [head, *rest]


def consistent(row: dict) -> bool:
    """TPS = out/E2E and TTFT + TPOT*(out-1) <= E2E (queueing can add to E2E), to the table's rounding."""
    out = int(row["output_tokens"].replace(",", ""))
    ttft, tpot, e2e, tps = (float(row[k]) for k in ("ttft_s", "tpot_ms", "e2e_s", "tps"))
    return ttft + tpot * (out - 1) / 1000 <= e2e + 1.0 and abs(out / e2e - tps) < 0.2


def parse_line(line: str, names: list[str], patterns: list[str]) -> dict:
    m = re.match(r"(\d+)([0-9a-f]{24})(.*)$", line)
    idx, doc, rest = m.groups()
    for cut in splits(rest, patterns):
        row = {"idx": idx, "doc_id": doc, **dict(zip(names, cut, strict=True))}
        if consistent(row):
            return {k: v.replace(",", "") for k, v in row.items()}
    raise ValueError(f"no consistent split for {line!r}")


def main(seed: Path, out_dir: Path) -> None:
    lines = seed.read_text(encoding="utf-8").splitlines()
    for entry, (section, names, patterns) in TABLES.items():
        start = lines.index(section)
        rows = []
        for line in lines[start + 1 :]:
            if re.match(r"\d+\.\d+\.\d+$", line):
                break
            if re.match(r"\d+[0-9a-f]{24}(measured|warmup)", line):
                rows.append(parse_line(line, names, patterns))
        path = out_dir / f"{entry}_per_request.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=["idx", "doc_id", *names])
            writer.writeheader()
            writer.writerows(rows)
        print(f"{path}: {len(rows)} rows")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
