#!/usr/bin/env python3
"""Issue each ring refill after the dot that reads the current tile instead of right after the wait,
by hand, to measure fewer bytes in flight per block (the opposite of early_refill_patch.py).

  late_refill_patch.py DUMP.cu OUT.cu [k|v|kv]

DUMP: decode's partial kernel with TMA copies in its one-warp loop (NEPTUNE_DUMP_CUDA of the default
on sm_90a). The emitted loop waits for tile t and at once refills the buffer of tile t - 1 with tile
t + S - 1. Here the refill of K (k), of V (v) or of both (kv, the default) moves below the dot that
reads tile t: the same buffers and tiles, each copy issued the dot's duration later. Run the result
with NEPTUNE_CUDA_OVERRIDE=<folder of OUT.cu>; the benchmark's fp64 check still applies."""
import re
import sys


def main(src, dst, which="kv"):
    s = open(src).read()
    dots = {"k": r"nd::mma_abt\(s, q_a, k_s_buf\(stage_t\), 0\);", "v": r"nd::mma_ab\(acc, s_a, v_s_buf\(stage_t\), 0, 0\);"}
    for t in which:
        refill = re.compile(r"\n\s*if \(t \+ \d+ < t_end\) \{\n\s*if \(threadIdx\.x == 0\) \{\n\s*nd::fence_proxy_async\(\);\n"
                            rf"\s*nd::mbarrier_arrive_expect_tx\({t}_s_full [^\n]*\n\s*nd::tma_load_tile\([^\n]*\n\s*\}}\n\s*\}}")
        m = refill.search(s) or sys.exit(f"late_refill_patch: the {t} refill not found in {src}")
        block = m.group(0)
        s = s[:m.start()] + s[m.end():]
        d = re.search(r"\n\s*" + dots[t], s) or sys.exit(f"late_refill_patch: the dot reading {t} not found in {src}")
        s = s[:d.end()] + block + s[d.end():]
    open(dst, "w").write(s)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    main(*sys.argv[1:])
