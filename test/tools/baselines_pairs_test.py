#!/usr/bin/env python3
"""baselines.py's paired comparison (paired) on hand-made series: the per-round ratio's median, its
bootstrap interval and the share of rounds Neptune won, with expected values worked out by hand in
the comments. Needs no torch (baselines.py imports it inside main).

  python3 test/tools/baselines_pairs_test.py apps/neptune_bench/baselines.py"""
import importlib.util, sys

spec = importlib.util.spec_from_file_location("baselines", sys.argv[1])
baselines = importlib.util.module_from_spec(spec)
spec.loader.exec_module(baselines)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


# Rounds whose ratios base / neptune are 0.9, 1.0, 1.1, 1.2, 1.3: median 1.1, won in 3 of 5 (1.0 is a tie).
p = baselines.paired([0.9, 2.0, 3.3, 1.2, 2.6], [1.0, 2.0, 3.0, 1.0, 2.0])
check(abs(p["median"] - 1.1) < 1e-12, f"median {p['median']} != 1.1")
check(abs(p["neptune_faster"] - 0.6) < 1e-12, f"share {p['neptune_faster']} != 0.6")
# A bootstrap median is a median of resampled ratios, so it lies within the ratios' range.
check(0.9 - 1e-12 <= p["low"] <= p["median"] <= p["high"] <= 1.3 + 1e-12, f"interval {p['low']}..{p['high']}")
# Rounds pair by index: with Neptune at 10, 1, 1, 10, 1 ms and the baseline at 11, 0.9, 0.9, 11, 1.2 the
# ratios are 1.1, 0.9, 0.9, 1.1, 1.2 (median 1.1, won 3 of 5), where the ratio of the medians would be
# 1.2 / 1 and pairing the sorted series 0.9, 0.9, 1.2 / 1, 1.1, 1.1 (won 3 of 5, but in other rounds).
p = baselines.paired([11, 0.9, 0.9, 11, 1.2], [10, 1, 1, 10, 1])
check(abs(p["median"] - 1.1) < 1e-12 and abs(p["neptune_faster"] - 0.6) < 1e-12, f"by index: {p}")
# A constant ratio: every bootstrap median is it.
nep = [1.0 + i / 99 for i in range(100)]
p = baselines.paired([1.01 * x for x in nep], nep)
check(abs(p["low"] - 1.01) < 1e-12 and abs(p["high"] - 1.01) < 1e-12 and p["neptune_faster"] == 1.0, f"constant: {p}")
# Neptune slower in every round: share 0, interval below 1.
p = baselines.paired([1.0] * 50, [1.002 + 0.001 * (i % 3) for i in range(50)])
check(p["neptune_faster"] == 0.0 and p["high"] < 1.0, f"all lost: {p}")
print(f"{'FAILED' if failures else 'passed'}: baselines.paired")
sys.exit(1 if failures else 0)
