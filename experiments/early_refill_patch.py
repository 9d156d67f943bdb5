#!/usr/bin/env python3
"""Refill each ring buffer as soon as its tile is read, by hand, to measure it before the compiler
emits it.

  early_refill_patch.py DUMP.cu OUT.cu

DUMP: decode's partial kernel with TMA copies in its one-warp loop (NEPTUNE_DUMP_CUDA of the default
on sm_90a), S ring stages. The emitted loop waits for tile t, then refills the buffer of tile t - 1
with tile t + S - 1: while the warp waits, S - 1 tiles are in flight. Here K's buffer is refilled with
tile t + S right after the score dot has read tile t, and V's right after the P.V dot, and the
prologue issues S tiles (the last after Q has left the buffer it shares with K): while the warp
waits for tile t, tiles t .. t + S - 1 are in flight, S instead of S - 1, in the same shared memory.
Run the result with NEPTUNE_CUDA_OVERRIDE=<folder of OUT.cu>; the benchmark's fp64 check still applies."""
import re
import sys


def fail(what, src):
    sys.exit(f"early_refill_patch: {what} not found in {src} (not a TMA split-K decode kernel?)")


def main(src, dst):
    s = open(src).read()
    m = re.search(r"const int stage_t = \(t - t_begin\) % (\d+);", s) or fail("the KV loop's ring", src)
    stages = int(m.group(1))
    # The loop's refills after each wait: remove them, remembering each copy's row and plane.
    refill = re.compile(r"\n(\s*)if \(t \+ (\d+) < t_end\) \{\n\s*if \(threadIdx\.x == 0\) \{\n\s*nd::fence_proxy_async\(\);\n"
                        r"\s*nd::mbarrier_arrive_expect_tx\((\w)_s_full \+ \(stage_t \+ \d+\) % \d+, (\d+)\);\n"
                        r"\s*nd::tma_load_tile\(\w_s_buf\(\(stage_t \+ \d+\) % \d+\), (\w_map), (.*), (.*), \w_s_full \+ \(stage_t \+ \d+\) % \d+\);\n"
                        r"\s*\}\n\s*\}")
    copies = {}
    for r in refill.finditer(s):
        ahead = int(r.group(2))
        row = r.group(6).replace(f"(t + {ahead})", "(T_)")
        copies[r.group(3)] = (r.group(4), r.group(5), row, r.group(7))
    if set(copies) != {"k", "v"}:
        fail("the K and V refills", src)
    s = refill.sub("", s)

    def copy(t, ind, tile, buf):
        nbytes, tmap, row, plane = copies[t]
        return (f"{ind}if ({tile} < t_end && threadIdx.x == 0) {{\n"
                f"{ind}    nd::fence_proxy_async();\n"
                f"{ind}    nd::mbarrier_arrive_expect_tx({t}_s_full + {buf}, {nbytes});\n"
                f"{ind}    nd::tma_load_tile({t}_s_buf({buf}), {tmap}, {row.replace('T_', tile)}, {plane}, {t}_s_full + {buf});\n"
                f"{ind}}}\n")

    # After each dot that reads a ring buffer: the block is past it, refill it with tile t + S.
    for t, dot in (("k", r"nd::mma_abt\(s, q_a, k_s_buf\(stage_t\), 0\);"), ("v", r"nd::mma_ab\(acc, s_a, v_s_buf\(stage_t\), 0, 0\);")):
        m = re.search(r"\n(\s*)" + dot + r"\n", s) or fail(f"the dot reading {t}", src)
        ind = m.group(1)
        s = s[:m.end()] + f"{ind}nd::barrier();\n" + copy(t, ind, f"t + {stages}", "stage_t") + s[m.end():]
    # The prologue's last tile, once Q (which shares a buffer with K) is in registers.
    m = re.search(r"\n(\s*)nd::load_a\(q_a, q_s_buf\(0\), 16 \* warp\);\n", s) or fail("Q's load", src)
    ind = m.group(1)
    last = stages - 1
    extra = f"{ind}nd::barrier();\n" + "".join(copy(t, ind, f"t_begin + {last}", str(last)) for t in ("k", "v"))
    s = s[:m.end()] + extra + s[m.end():]
    open(dst, "w").write(s)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
