#!/usr/bin/env python3
"""Work claiming in a split-K decode kernel, by hand, to measure it before the compiler makes it.

  claim_patch.py DUMP.cu OUT.cu    DUMP: decode's partial kernel with TMA copies in its one-warp loop
                                   and interleaved chunks (NEPTUNE_DUMP_CUDA of the default on sm_90a)

The blocks of a (batch, KV head) group no longer take fixed tiles: thread 0 claims each next tile from
a per-group counter (atomicAdd) when it issues the tile's copies, S - 1 iterations ahead, and puts the
index in a shared slot of the ring; the loop ends at the first claim past the last tile (its barrier
completed without bytes). A block on a slow SM so takes fewer tiles and the group's blocks end
together. The group's last arrival (or the only chunk) resets the counter for the next launch. Run
the result with NEPTUNE_CUDA_OVERRIDE=<folder of OUT.cu>; the benchmark's fp64 check still applies."""
import re
import sys


def main(src, dst):
    s = open(src).read()
    tile = r"\(j_first \+ \(chunks \* \(?(t_begin \+ \d|t \+ 2|t)\)?\)\)"
    # File scope: the claim counters (zero at load; each launch leaves them zero).
    s = s.replace('extern "C" __global__', "__device__ unsigned neptune_claims[1 << 16];\n\nextern \"C\" __global__", 1)
    # After the tensor maps' prefetch: the slots and the claim helper.
    s = s.replace("    __syncthreads();\n", "    __syncthreads();\n"
                  "    __shared__ int claim_slot[8];\n"
                  "    unsigned *const claims = neptune_claims + (b * kv_heads + hkv);\n"
                  "    bool claims_done = false;\n"
                  "    auto claim = [&]() -> int {\n"
                  "        if (claims_done) return n_tiles;\n"
                  "        const int c = int(atomicAdd(claims, 1u));\n"
                  "        if (c >= n_tiles) claims_done = true;\n"
                  "        return c;\n"
                  "    };\n", 1)
    s = s.replace("t_end = n_own;", "t_end = n_own;\n    (void)t_end;", 1)
    lines = s.split("\n")
    out = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        # A copy site: the prologue's `if (t_begin + N < t_end) { if (threadIdx.x == 0) { expect; load } }`
        # or the loop's refill `if (t + 2 < t_end) { if (threadIdx.x == 0) { fence; expect; load } }`.
        # The K copy claims the tile into the stage's slot; the V copy reads it; past the last tile
        # the barrier completes without bytes.
        m = re.match(r"^(\s*)if \((t_begin \+ (\d)|t \+ 2) < t_end\) \{$", ln)
        if m:
            ind, n = m.group(1), m.group(3)
            body = lines[i + 2:i + (4 if n else 5)]
            expect, load = body[-2], body[-1]
            slot = f"claim_slot[{n}]" if n else "claim_slot[(stage_t + 2) % 3]"
            bar = re.search(r"\((\w+_full \+ (\d|\(stage_t \+ 2\) % 3))", expect).group(1)
            out.append(f"{ind}if (threadIdx.x == 0) {{")
            if "k_s_full" in expect:
                out.append(f"{ind}    {slot} = claim();")
            out.append(f"{ind}    if ({slot} < n_tiles) {{")
            out.extend(ind + "    " + b.strip() for b in body[:-1])
            out.append(ind + "    " + re.sub(tile, slot, load.strip()))
            out.append(f"{ind}    }} else nd::mbarrier_arrive_expect_tx({bar}, 0);")
            out.append(f"{ind}}}")
            i += len(body) + 4
            continue
        if re.match(r"^\s*for \(int t = t_begin; t < t_end; \+\+t\) \{$", ln):
            out.append(ln.replace("t < t_end", ""))
            i += 1
            continue
        # The first wait of an iteration: then the claimed tile, or the end.
        m = re.match(r"^(\s*)nd::mbarrier_wait\(k_s_full \+ stage_t, phase_t\);$", ln)
        if m:
            out.append(ln)
            out.append(f"{m.group(1)}const int tile_t = claim_slot[stage_t];")
            out.append(f"{m.group(1)}if (tile_t >= n_tiles) break;")
            i += 1
            continue
        ln = re.sub(tile, "tile_t", ln)
        m = re.match(r"^(\s*)if \(nd::last_arrival\(.*\)\) \{$", ln)
        if m:
            out.append(ln)
            out.append(f"{m.group(1)}    if (threadIdx.x == 0) *claims = 0u;")
            i += 1
            continue
        m = re.match(r"^(\s*)if \(\(chunks == 1\)\) \{$", ln)
        if m:
            out.append(ln)
            out.append(f"{m.group(1)}    if (threadIdx.x == 0) *claims = 0u;")
            i += 1
            continue
        out.append(ln)
        i += 1
    text = "\n".join(out)
    if "j_first + (chunks" in text or "t_end)" in text:
        sys.exit("claim_patch: a tile expression or loop bound was left unpatched in " + src)
    open(dst, "w").write(text)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
