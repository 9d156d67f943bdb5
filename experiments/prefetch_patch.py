#!/usr/bin/env python3
"""L2 prefetches ahead of the ring in a split-K decode kernel, by hand, to measure them before the
compiler emits them.

  prefetch_patch.py DUMP.cu OUT.cu --ahead D      every refill of tile t + S - 1 also prefetches tile
                                                  t + S - 1 + D into L2 (tiles S .. S + D - 1 are not)
  prefetch_patch.py DUMP.cu OUT.cu --tail R       when a block refills its R + 1-th last tile, it
                                                  prefetches its last R tiles at once

DUMP: decode's partial kernel with TMA copies (NEPTUNE_DUMP_CUDA of the default on sm_90a). Why: the
blocks of a one-wave decode launch end their streams microseconds apart, and in the last of them the
few blocks still running hold only their ring's S tiles in flight each; L2 prefetches
(cp.async.bulk.prefetch.tensor) put more of their remaining bytes in flight without shared memory.
Run the result with NEPTUNE_CUDA_OVERRIDE=<folder of OUT.cu>; the benchmark's fp64 check still applies."""
import re
import sys

HEAD = r'''
// L2 prefetch of a tile's 64-column boxes (prefetch_patch.py)
template <int COLS>
__device__ __forceinline__ void neptune_prefetch_tile(const nd::tensor_map &map, int row0, int plane) {
#pragma unroll
    for (int b = 0; b < COLS / 64; ++b)
        asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];"
                     :
                     : "l"(reinterpret_cast<unsigned long long>(&map)), "r"(64 * b), "r"(row0), "r"(plane)
                     : "memory");
}
'''


def main(src, dst, mode, n):
    s = open(src).read()
    s = s.replace('extern "C" __global__', HEAD + '\nextern "C" __global__', 1)
    # the loop's refills: tma_load_tile(x_s_buf((stage_t + A) % S), x_map, ROW(t + A), PLANE, bar);
    pat = re.compile(r"^(\s*)nd::tma_load_tile\((\w)_s_buf\(\(stage_t \+ (\d+)\) % \d+\), (\w_map), "
                     r"(\(\(j_first \+ \(j_step \* \(t \+ \d+\)\)\) \* 32\)), (.*), \w_s_full \+ .*\);$", re.M)
    cols = re.search(r"swizzled_tile<nd::\w+, \d+, (\d+)>", s).group(1)
    count = 0

    def refill(m):
        nonlocal count
        count += 1
        ind, ahead, tmap, row, plane = m.group(1), int(m.group(3)), m.group(4), m.group(5), m.group(6)
        out = m.group(0)
        if mode == "ahead":
            far = row.replace(f"(t + {ahead})", f"(t + {ahead + n})")
            out += f"\n{ind}if (t + {ahead + n} < t_end) neptune_prefetch_tile<{cols}>({tmap}, {far}, {plane});"
        else:
            loop_row = row.replace(f"(t + {ahead})", "u_")
            out += (f"\n{ind}if (t + {ahead} == t_end - {n + 1}) for (int u_ = t + {ahead + 1}; u_ < t_end; ++u_)"
                    f" neptune_prefetch_tile<{cols}>({tmap}, {loop_row}, {plane});")
        return out

    s = pat.sub(refill, s)
    if count != 2:
        sys.exit(f"prefetch_patch: expected the K and V refills in {src}, found {count}")
    open(dst, "w").write(s)


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[3] not in ("--ahead", "--tail"):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3][2:], int(sys.argv[4]))
