#!/usr/bin/env python3
"""Neptune's AOT kernel (libneptune_ops.so) against one SDPA backend, timed in alternating pairs.

    python3 scripts/device/paired_ab.py decode_causal 8,8192 [--impl sdpa_cudnn] [--repeat 400]

neptune_bench compares medians of two series taken in separate processes and minutes apart; when two
kernels both run at the memory's rate, the drift between those minutes is larger than the difference
being measured. Here both run in one process on the same inputs, each timed call after a 256 MB
write that flushes L2 (baselines.py's method and checks), the two alternating call by call with the
order rotating. Each repeat gives a pair taken under the same clocks and the same memory state; the
reported ratio is the median of the per-pair ratios (baseline / Neptune, above 1: Neptune faster),
with a 95 % bootstrap interval and the share of pairs Neptune won.
"""
import argparse, os, random, statistics, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "apps", "neptune_bench"))
import baselines  # noqa: E402


def bootstrap_median(xs, rounds=2000, seed=1):
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(rounds))
    return meds[int(0.025 * rounds)], meds[int(0.975 * rounds) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("op", help="an operator baselines.py's self-test knows (neptune_bench list)")
    ap.add_argument("shape", help="B,S")
    ap.add_argument("--impl", default="sdpa_cudnn", choices=baselines.IMPLS, help="the baseline (default sdpa_cudnn)")
    ap.add_argument("--repeat", type=int, default=400, help="pairs timed (default 400)")
    ap.add_argument("--lib", default="", help="libneptune_ops.so (default: found as neptune_ops.Library finds it)")
    a = ap.parse_args()
    import torch
    batch, seq = (int(x) for x in a.shape.split(","))
    case = argparse.Namespace(op=a.op, batch=batch, seq=seq, self_test=True)
    with tempfile.TemporaryDirectory(prefix="paired_ab_") as tmp:
        baselines.make_self_test(torch, case, tmp)
        case.inputs = case.outputs = tmp
        c = baselines.load_case(torch, case)
    fns = {"neptune_aot": baselines.neptune_impl(torch, c, a.lib), a.impl: baselines.sdpa_impl(torch, c, a.impl)}
    for name, fn in fns.items():
        if isinstance(fn, str):
            sys.exit(f"paired_ab: {name} unsupported: {fn}")
        r = baselines.check(torch, fn(), c)
        ok = r["nonfinite"] == 0 and r["ref_max_abs"] is not None and r["ref_max_abs"] <= baselines.SELF_TEST_TOL
        print(f"{name:<12} check: ref max|err| {r['ref_max_abs']:.2e}, rms {r['ref_rms']:.2e}, "
              f"max|d| vs the fp32 stand-in {r['max_abs_vs_neptune']:.2e}: {'ok' if ok else 'FAILED'}")
        if not ok:
            sys.exit(1)
        for _ in range(baselines.WARMUP):
            fn()
    torch.cuda.synchronize()
    ms = baselines.time_all(torch, fns, a.repeat)
    nep, base = ms["neptune_aot"], ms[a.impl]
    ratios = [b / n for n, b in zip(nep, base)]
    lo, hi = bootstrap_median(ratios)
    unit, amount = baselines.work(c["meta"])
    for name, xs in (("neptune_aot", nep), (a.impl, base)):
        med = statistics.median(xs)
        print(f"{name:<12} median {med * 1e3:8.1f} us  min {min(xs) * 1e3:8.1f}  max {max(xs) * 1e3:8.1f}  "
              f"{amount / (med * 1e-3) / 1e12:6.2f} {unit}")
    won = sum(r > 1 for r in ratios) / len(ratios)
    print(f"{a.op} {a.shape}, {a.repeat} pairs: {a.impl} / neptune per pair, median {statistics.median(ratios):.4f} "
          f"(95 % bootstrap {lo:.4f} to {hi:.4f}); Neptune faster in {100 * won:.0f} % of pairs")


if __name__ == "__main__":
    main()
