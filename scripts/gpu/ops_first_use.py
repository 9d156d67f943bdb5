#!/usr/bin/env python3
"""Variants of libneptune_ops.so compiled on first use, from Python on torch tensors.

  ops_first_use.py [--lib PATH] [--json FILE] [--quick] [--parts timing,coverage,strided]

1. Timing: for a prefill, a decode and row-wise configurations (bf16 row chains) that no AOT variant
   has, two fresh processes in turn, on one new cache directory: the first compiles the variant on
   its first call, the second loads it from the cache. Each reports the library's load, its first
   call (synchronized) and a second call.
2. Coverage: prefill (causal, grouped heads) and decode at head dims 64, 80, 96, 128, 192 and 256,
   f16 and bf16, 1 to 16 query heads per KV head, in both layouts ([B, H, S, D], and [B, S, H, D]
   with layout="bshd"), against torch's SDPA (math backend) in f32, with the bounds of the GPU test
   suite (|err| <= atol + rtol * |ref|).
3. Strided against contiguous: the same values as [B, H, S, D] tensors and as [B, S, H, D] ones
   (layout="bshd", read in place), bound calls timed alternately with CUDA events, the L2 flushed
   before each; medians and their ratio.

Prints one line per case and writes everything as JSON. Needs torch with CUDA."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

TIMING = [
    ("prefill_causal", "bfloat16", 64, 8, 8, 1, 1024),
    ("decode_gqa", "bfloat16", 128, 32, 8, 4, 4096),
    ("softmax", "bfloat16", 4096, 8192),  # row-wise: op, dtype, rows, cols
    ("rmsnorm", "bfloat16", 4096, 8192),
    ("layernorm", "bfloat16", 4096, 8192),
    ("cross_entropy", "bfloat16", 4096, 32768),
]
ROW_WISE = ("softmax", "logsumexp", "rmsnorm", "layernorm", "cross_entropy")
TOLERANCE = {"float16": (2e-3, 2e-2), "bfloat16": (1e-2, 6e-2)}  # atol, rtol (test/ops/gpu_ops.cpp)


STRIDED = [
    ("prefill_gqa", "float16", 128, 32, 8, 4, 4096),
    ("decode_gqa", "float16", 128, 32, 8, 8, 8192),
    ("decode_gqa", "bfloat16", 128, 64, 8, 8, 8192),
]


def inputs(op, dtype, hd, hq, hkv, b, s, torch, layout="bhsd"):
    """q, k, v as [B, H, S, D] tensors, or for "bshd" as [B, S, H, D] ones holding the same values."""
    g = torch.Generator(device="cuda").manual_seed(7)
    dt = getattr(torch, dtype)
    sq = 1 if op.startswith("decode") else s
    q = torch.randn(b, hq, sq, hd, device="cuda", generator=g).to(dt)
    k = torch.randn(b, hkv, s, hd, device="cuda", generator=g).to(dt)
    v = torch.randn(b, hkv, s, hd, device="cuda", generator=g).to(dt)
    if layout == "bshd":
        return tuple(t.transpose(1, 2).contiguous() for t in (q, k, v))
    return q, k, v


def row_inputs(op, dtype, rows, cols, torch):
    """x [rows, cols] and the operator's other inputs: gamma (and beta) [cols], or int32 labels [rows]."""
    g = torch.Generator(device="cuda").manual_seed(7)
    dt = getattr(torch, dtype)
    x = torch.randn(rows, cols, device="cuda", generator=g).to(dt)
    if op == "rmsnorm":
        return x, torch.ones(cols, device="cuda", dtype=dt)
    if op == "layernorm":
        return x, torch.ones(cols, device="cuda", dtype=dt), torch.zeros(cols, device="cuda", dtype=dt)
    if op == "cross_entropy":
        return x, torch.randint(0, cols, (rows,), device="cuda", dtype=torch.int32, generator=g)
    return (x,)


def child(args):
    """One process's first and second call of a configuration (timing mode)."""
    import torch
    config = json.loads(args.child)
    op = config[0]
    if op in ROW_WISE:
        tensors = row_inputs(*config, torch)
    else:
        tensors = inputs(*config, torch)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    import neptune_ops
    ops = neptune_ops.Library(args.lib)
    t1 = time.perf_counter()
    out = ops.run(op, *tensors)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    ops.run(op, *tensors, out=out)
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    print(json.dumps({"variant": ops.select(op, *tensors).name, "load_ms": 1e3 * (t1 - t0),
                      "first_call_ms": 1e3 * (t2 - t1), "second_call_ms": 1e3 * (t3 - t2)}))


def timing(args):
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NEPTUNE_CACHE_DIR=cache)
        for config in TIMING:
            for process in ("compiles", "loads from the cache"):
                cmd = [sys.executable, __file__, "--child", json.dumps(config)] + (["--lib", args.lib] if args.lib else [])
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
                if r.returncode != 0:
                    raise SystemExit(f"{config}: {r.stderr.strip()[-2000:]}")
                row = dict(json.loads(r.stdout.strip().splitlines()[-1]), process=process, op=config[0],
                           dtype=config[1])
                if config[0] in ROW_WISE:
                    row.update(rows=config[2], cols=config[3])
                else:
                    row.update(head_dim=config[2], q_heads=config[3], kv_heads=config[4], batch=config[5],
                               seq=config[6])
                print(f"timing {row['variant']:28s} {process:22s} load {row['load_ms']:7.1f} ms  first call "
                      f"{row['first_call_ms']:8.1f} ms  second call {row['second_call_ms']:6.2f} ms", flush=True)
                rows.append(row)
    return rows


def coverage(args):
    import torch
    import torch.nn.functional as F
    import neptune_ops
    ops = neptune_ops.Library(args.lib)
    rows = []
    dims = [64, 128] if args.quick else [64, 80, 96, 128, 192, 256]
    groups = [1, 4] if args.quick else [1, 2, 4, 8, 16]
    for op, b, s in (("prefill_gqa", 1, 300), ("decode_gqa", 2, 1500)):
        for dtype in ("float16", "bfloat16"):
            for hd in dims:
                for group, layout in ((g, l) for g in groups for l in ("bhsd", "bshd")):
                    hq = 16
                    q, k, v = inputs(op, dtype, hd, hq, hq // group, b, s, torch, layout)
                    t0 = time.perf_counter()
                    try:
                        out = ops.run(op, q, k, v, layout=layout)
                        torch.cuda.synchronize()
                        error = None
                    except neptune_ops.NeptuneOpsError as e:
                        out, error = None, str(e)
                    seconds = time.perf_counter() - t0
                    row = {"op": op, "dtype": dtype, "head_dim": hd, "group": group, "layout": layout, "batch": b,
                           "seq": s, "first_call_s": seconds}
                    if out is None:
                        row.update(ok=False, error=error)
                    else:
                        if layout == "bshd":  # compared as [B, H, S, D]
                            q, k, v, out = (t.transpose(1, 2) for t in (q, k, v, out))
                        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
                            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                                 is_causal=op == "prefill_gqa", enable_gqa=True)
                        atol, rtol = TOLERANCE[dtype]
                        err = (out.float() - ref).abs()
                        excess = (err - (atol + rtol * ref.abs())).max().item()
                        row.update(ok=bool(excess <= 0 and torch.isfinite(out).all().item()),
                                   max_abs_err=err.max().item(),
                                   rel_rms_err=(err.pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item(),
                                   variant=ops.select(op, q, k, v).name)
                    print(f"{op:12s} {dtype:9s} d{hd:<4d} group {group:2d} {layout}: "
                          f"{'ok  ' if row['ok'] else 'FAIL'} {row.get('variant', row.get('error', ''))} "
                          f"max err {row.get('max_abs_err', float('nan')):.2e} (first use {seconds:.2f} s)", flush=True)
                    rows.append(row)
    return rows


def strided(args):
    import torch
    import neptune_ops
    ops = neptune_ops.Library(args.lib)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # > 4x the L2
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rows = []
    repeats = 10 if args.quick else 30
    for config in STRIDED:
        op = config[0]
        calls = {layout: ops.bind(op, *inputs(*config, torch, layout), layout=layout) for layout in ("bhsd", "bshd")}
        ms = {layout: [] for layout in calls}
        for call in calls.values():  # warm-up (and compile where needed)
            call()
        for _ in range(repeats):
            for layout, call in calls.items():  # alternately, so drifts hit both
                flush.zero_()
                start.record()
                call()
                stop.record()
                stop.synchronize()
                ms[layout].append(start.elapsed_time(stop))
        med = {layout: sorted(t)[len(t) // 2] for layout, t in ms.items()}
        row = {"op": op, "dtype": config[1], "head_dim": config[2], "q_heads": config[3], "kv_heads": config[4],
               "batch": config[5], "seq": config[6], "variant": calls["bhsd"].variant.name, "repeats": repeats,
               "contiguous_ms": med["bhsd"], "strided_ms": med["bshd"], "strided_over_contiguous": med["bshd"] / med["bhsd"]}
        print(f"strided {op:12s} {config[1]:9s} B={config[5]} S={config[6]} Hq={config[3]} Hkv={config[4]}: "
              f"[B,H,S,D] {med['bhsd']:.3f} ms, [B,S,H,D] {med['bshd']:.3f} ms, ratio {row['strided_over_contiguous']:.3f}",
              flush=True)
        rows.append(row)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", help="libneptune_ops.so (default: as neptune_ops.Library finds it)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--quick", action="store_true", help="head dims 64 and 128, groups 1 and 4 only")
    p.add_argument("--parts", default="timing,coverage,strided", help="which parts to run (default: all three)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    import torch
    parts = {"timing": timing, "coverage": coverage, "strided": strided}
    chosen = args.parts.split(",")
    unknown = [c for c in chosen if c not in parts]
    if unknown:
        p.error(f"unknown part {unknown[0]!r}; the parts are {', '.join(parts)}")
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}
    for c in chosen:
        result[c] = parts[c](args)
    failed = [r for r in result.get("coverage", []) if not r["ok"]]
    if "coverage" in result:
        print(f"coverage: {len(result['coverage']) - len(failed)} of {len(result['coverage'])} cases within bounds")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
