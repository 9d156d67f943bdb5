#!/usr/bin/env python3
"""The row-wise results table of docs/performance.md, from a neptune_bench profile JSON file.

    scripts/rowwise_table.py docs/results/rowwise-2026-12-04.json

One row per point: Neptune's median time and TB/s, its fraction of the copy measured in the same
call, torch eager and torch.compile (same call), and Neptune's speedup over the faster of the two.
"""
import argparse
import json


def median_us(point, impl):
    for r in point["results"]:
        if r["impl"] == impl and r.get("supported") and r.get("median_ms"):
            return r["median_ms"] * 1e3
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="a neptune_bench profile --json file (with --append points)")
    args = ap.parse_args()
    points = json.load(open(args.results))["points"]
    print("| operator | rows x cols | Neptune us | TB/s | % of copy | torch eager us | torch.compile us |"
          " vs the faster torch |")
    print("|---|---|---|---|---|---|---|---|")
    for p in points:
        n, eager, comp = (median_us(p, i) for i in ("neptune", "torch_eager", "torch_compile"))
        tbs = next(r["throughput"] for r in p["results"] if r["impl"] == "neptune")
        best = min(t for t in (eager, comp) if t)
        cells = [p["op"], f'{p["batch"]} x {p["seq"]}', f"{n:.1f}", f"{tbs:.2f}",
                 f'{100 * p["fraction_of_copy"]:.0f}', f"{eager:.1f}", f"{comp:.1f}", f"{best / n:.2f}x"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
