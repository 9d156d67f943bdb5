#!/usr/bin/env python3
"""Time stamps inside a split-K decode kernel, to see where its last microseconds go (an H200).

  patch DUMP.cu OUT.cu [--launch N]   adds %globaltimer stamps to a kernel dumped by NEPTUNE_DUMP_CUDA
                                      (start, end of the KV loop, after the arrival, end) in launch N
                                      (default 6: a timed call after the check and the warm-up); the
                                      launch's last block prints every block's line; run it with
                                      NEPTUNE_CUDA_OVERRIDE=<folder of OUT.cu>
  read LOG                            reads those lines: the spread of the blocks' starts, stream ends
                                      and arrivals, and the combining blocks' tails, in microseconds

Dump the workspace fold (--cluster-merge 0): the cluster merge has no arrival to stamp.
The stamps cost a few registers (the timer ticks in steps of 256 ns on the H200); read them as a
timeline, not as the kernel's time (the benchmark's events give that)."""
import re
import statistics
import sys

PROBE_HEAD = r'''
extern "C" __device__ int vprintf(const char *format, const char *args);  // printf without <cstdio> (NVRTC)
struct neptune_probe_line {
    unsigned sm;
    int x, y, z;
    unsigned long long start, streamed, arrived, end;
    int combined;
};
__device__ unsigned long long neptune_probe_blocks;
#define NEPTUNE_PROBE_LINES 8192u
__device__ neptune_probe_line neptune_probe_lines[NEPTUNE_PROBE_LINES];
__device__ unsigned neptune_probe_done;
__device__ __forceinline__ unsigned long long neptune_probe_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
'''


def patch(src, dst, launch):
    s = open(src).read()
    lines = s.split("\n")
    out = []
    kernel_start = None
    for i, ln in enumerate(lines):
        if re.match(r"^(extern \"C\" )?__global__", ln):
            out.append(PROBE_HEAD)
        m = re.match(r"^(\s*)if \((nd::last_arrival\(.*\))\) \{$", ln)
        if m:
            out.append(f"{m.group(1)}const bool probe_last_ = {m.group(2)};")
            out.append(f"{m.group(1)}probe_arrived_ = neptune_probe_now();")
            out.append(f"{m.group(1)}probe_combined_ = probe_last_;")
            out.append(f"{m.group(1)}if (probe_last_) {{")
            continue
        if "// several chunks: store the state" in ln:
            out.append("    probe_streamed_ = neptune_probe_now();")
        out.append(ln)
        if "extern __shared__" in ln and kernel_start is None:
            kernel_start = len(out)
            out.append("    const unsigned long long probe_start_ = neptune_probe_now();")
            out.append("    unsigned long long probe_streamed_ = 0, probe_arrived_ = 0; bool probe_combined_ = false;")
            out.append("    unsigned long long probe_launch_ = 0;")
            out.append("    if (threadIdx.x == 0) probe_launch_ = atomicAdd(&neptune_probe_blocks, 1ull) / "
                       "(unsigned long long)(gridDim.x * gridDim.y * gridDim.z);")
    if kernel_start is None:
        sys.exit("patch: no kernel found in " + src)
    # The kernel's closing brace is the file's last line that is exactly "}".
    last = max(i for i, ln in enumerate(out) if ln == "}")
    # Every block files its line; the launch's last block prints them all, so that no printf runs while
    # a block is still being timed.
    out[last:last] = [
        "    {",
        "        const unsigned long long probe_end_ = neptune_probe_now();",
        f"        if (threadIdx.x == 0 && probe_launch_ == {launch}ull) {{",
        "            unsigned smid_; asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(smid_));",
        "            const unsigned blocks_ = gridDim.x * gridDim.y * gridDim.z;",
        "            const unsigned id_ = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);",
        "            if (id_ < NEPTUNE_PROBE_LINES) neptune_probe_lines[id_] = neptune_probe_line{smid_, int(blockIdx.x), "
        "int(blockIdx.y), int(blockIdx.z), probe_start_, probe_streamed_, probe_arrived_, probe_end_, int(probe_combined_)};",
        "            __threadfence();",
        "            if (atomicAdd(&neptune_probe_done, 1u) + 1u == blocks_) {",
        "                __threadfence();",
        "                for (unsigned i = 0; i < blocks_ && i < NEPTUNE_PROBE_LINES; ++i) {",
        "                    neptune_probe_line l;",
        "                    const volatile unsigned *src = reinterpret_cast<const volatile unsigned *>(neptune_probe_lines + i);",
        "                    unsigned *dst = reinterpret_cast<unsigned *>(&l);",
        "                    for (unsigned w = 0; w < sizeof l / 4; ++w) dst[w] = src[w];",
        "                    vprintf(\"PROBE %u %d %d %d %llu %llu %llu %llu %d\\n\", reinterpret_cast<const char *>(&l));",
        "                }",
        "            }",
        "        }",
        "    }",
    ]
    open(dst, "w").write("\n".join(out))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def read(log):
    rows = []
    for ln in open(log):
        if ln.startswith("PROBE "):
            f = ln.split()
            rows.append(dict(sm=int(f[1]), x=int(f[2]), y=int(f[3]), z=int(f[4]), t0=int(f[5]), ts=int(f[6]),
                             ta=int(f[7]), te=int(f[8]), last=int(f[9])))
    if not rows:
        sys.exit("read: no PROBE lines in " + log)
    base = min(r["t0"] for r in rows)
    us = lambda t: (t - base) / 1000.0
    end = max(r["te"] for r in rows)
    print(f"{len(rows)} blocks on {len(set(r['sm'] for r in rows))} SMs; kernel (first start to last end) "
          f"{us(end):.2f} us")
    for name, key in (("start", "t0"), ("stream end", "ts"), ("arrival", "ta"), ("end", "te")):
        v = [us(r[key]) for r in rows if r[key]]
        if v:
            print(f"  {name:<11} min {min(v):8.2f}  p10 {pct(v, .1):8.2f}  median {statistics.median(v):8.2f}  "
                  f"p90 {pct(v, .9):8.2f}  max {max(v):8.2f}")
    fence = [(r["ta"] - r["ts"]) / 1000 for r in rows if r["ta"] and r["ts"]]
    if fence:
        print(f"  store + arrival per block: median {statistics.median(fence):.2f} us, max {max(fence):.2f}")
    comb = [(r["te"] - r["ta"]) / 1000 for r in rows if r["last"]]
    if comb:
        print(f"  combine in the {len(comb)} last blocks: median {statistics.median(comb):.2f} us, max {max(comb):.2f}")
    streams = sorted(us(r["ts"]) for r in rows if r["ts"])
    if streams:
        print(f"  after the last stream end: {us(end) - streams[-1]:.2f} us; blocks still streaming at "
              f"90 % of the kernel: {sum(1 for t in streams if t > 0.9 * us(end))}")
    per_sm = {}
    for r in rows:
        per_sm.setdefault(r["sm"], []).append(r)
    counts = statistics.multimode(len(v) for v in per_sm.values())
    print(f"  blocks per SM: {min(len(v) for v in per_sm.values())} to {max(len(v) for v in per_sm.values())} "
          f"(most often {counts})")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "patch":
        launch = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--launch" else 6
        patch(sys.argv[2], sys.argv[3], launch)
    elif len(sys.argv) == 3 and sys.argv[1] == "read":
        read(sys.argv[2])
    else:
        sys.exit(__doc__)
