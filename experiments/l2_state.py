#!/usr/bin/env python3
"""How the L2's state before a timed call moves a decode baseline's time (an H200).

The benchmark flushes L2 by writing a 256 MB buffer, which leaves L2 full of dirty lines that the timed
kernel's misses must write back to memory; flushing by reading leaves clean lines, evicted for free.
This times PyTorch's SDPA backends on decode shapes after either flush (same inputs, interleaved,
median of --repeat), so the write-back's share of a kernel's time can be read off, beside
read_ceiling.cu's RC_CLEAN=1 for pure streaming.

  python3 experiments/l2_state.py [--shape B,Hq,Hkv,S] ... [--repeat N] [--impl cudnn,flash]
"""
import argparse
import statistics

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

FLUSH_BYTES = 256 << 20


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", help="B,Hq,Hkv,S (decode: one query row); default 8,32,32,8192 "
                    "and 8,64,8,8192")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--impl", default="cudnn,flash", help="SDPA backends: cudnn, flash")
    ap.add_argument("--mode", default="both", choices=["both", "dirty", "clean"],
                    help="which flushes to time (one alone suits a profiler's kernel filter)")
    a = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split(",")) for s in (a.shape or ["8,32,32,8192", "8,64,8,8192"])]
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    sink = torch.empty((), dtype=torch.int64, device="cuda")

    def dirty():
        flush.zero_()

    def clean():
        torch.sum(flush.view(torch.int64), dim=0, out=sink)  # reads every line, writes 8 bytes

    for B, hq, hkv, S in shapes:
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(B, hq, 1, 128, device="cuda", dtype=torch.float16, generator=g)
        k = torch.randn(B, hkv, S, 128, device="cuda", dtype=torch.float16, generator=g)
        v = torch.randn(B, hkv, S, 128, device="cuda", dtype=torch.float16, generator=g)
        kv_bytes = 2 * k.numel() * 2
        for name in a.impl.split(","):
            def call():
                with sdpa_kernel(backends[name]):
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=hq != hkv)
            for _ in range(5):
                call()
            modes = [m for m in (("dirty", dirty), ("clean", clean)) if a.mode in ("both", m[0])]
            events = []
            for r in range(a.repeat):
                for mode, f in modes if r % 2 == 0 else modes[::-1]:
                    f()
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    call()
                    e.record()
                    events.append((mode, s, e))
            # One synchronisation at the end, as baselines.py does: a wait per call would leave the GPU
            # idle between the start event and the call while the CPU dispatches it.
            torch.cuda.synchronize()
            med = {m: float("nan") for m in ("dirty", "clean")}
            for m, _ in modes:
                med[m] = statistics.median(s.elapsed_time(e) for mode, s, e in events if mode == m)
            print(f"sdpa_{name:5s} B={B} Hq={hq} Hkv={hkv} S={S}: L2 dirty {med['dirty'] * 1e3:7.1f} us "
                  f"({kv_bytes / med['dirty'] / 1e9:.2f} TB/s), clean {med['clean'] * 1e3:7.1f} us "
                  f"({kv_bytes / med['clean'] / 1e9:.2f} TB/s)")


if __name__ == "__main__":
    main()
