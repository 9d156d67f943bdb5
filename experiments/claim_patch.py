#!/usr/bin/env python3
"""Work claiming in a split-K decode kernel, by hand, to measure it before the compiler makes it.

  claim_patch.py DUMP.cu OUT.cu [--spread] [--no-claims] [--deep]
                                   DUMP: decode's partial kernel with TMA copies in its one-warp loop
                                   and interleaved chunks (NEPTUNE_DUMP_CUDA of the default on sm_90a),
                                   any number of ring stages S

The blocks of a (batch, KV head) group keep their first S - 1 tiles (chunk c: c, c + chunks, ...) and
claim every later one from a per-group counter, so a block on a slow SM takes fewer tiles and the
group's blocks end together. The claim is taken ahead of use: thread 0 issues the atomicAdd for the
next claim when it issues a tile's copies and reads its result only at the next refill, an iteration
later, so the round trip is off the warp's path (the version that waited for each claim before its
copy was 13-16 % slower). The tile of each ring stage sits in a shared slot; the loop ends at the
first slot past the last visible tile, whose barriers were completed without bytes. The group's last
arrival (or the only chunk) resets the counter for the next launch. With --spread the blocks are
renumbered chunk-major (block i of the launch is chunk i / groups of group i % groups), so that a
group's blocks land on distant SMs rather than the two SMs of one TPC, whose speeds are alike;
--no-claims keeps the fixed tiles (the renumbering alone); --deep keeps two claims in flight
instead of one. Each group's counter has a 128-byte line of its own. Run the result with
NEPTUNE_CUDA_OVERRIDE=<folder of OUT.cu>; the benchmark's fp64 check still applies."""
import re
import sys


def fail(what, src):
    sys.exit(f"claim_patch: {what} not found in {src} (not a TMA split-K decode kernel?)")


SPREAD = """    const int lin_ = block_x + gridDim.x * (block_y + gridDim.y * block_z);
    const int groups_ = gridDim.y * gridDim.z;
    const int chunk = lin_ / groups_;
    const int hkv = (lin_ % groups_) % gridDim.y;
    const int b = (lin_ % groups_) / gridDim.y;"""


def main(src, dst, spread=False, claims=True, deep=False):
    s = open(src).read()
    if spread:
        fixed = "    const int chunk = block_x;\n    const int hkv = block_y;\n    const int b = block_z;"
        if fixed not in s:
            fail("the block numbering", src)
        s = s.replace(fixed, SPREAD, 1)
    if not claims:
        open(dst, "w").write(s)
        return
    m = re.search(r"const int stage_t = \(t - t_begin\) % (\d+);", s) or fail("the KV loop's ring", src)
    stages = int(m.group(1))
    ahead = stages - 1
    m = re.search(r"(\n\s*)const int n_own = max\(nd::div_euclid\(\(\(\((.*) - j_first\) \+ chunks\) \+ -1\), chunks\), 0\);", s)
    m or fail("n_own", src)
    s = s.replace(m.group(0), m.group(0) + f"{m.group(1)}const int n_vis = {m.group(2)};", 1)
    s = s.replace('extern "C" __global__', "__device__ unsigned neptune_claims[(1 << 16) * 32];\n\nextern \"C\" __global__", 1)
    s = s.replace("    __syncthreads();\n", "    __syncthreads();\n"
                  f"    __shared__ int claim_slot[{stages}];\n"
                  "    unsigned *const claims = neptune_claims + 32 * (b * kv_heads + hkv);\n"
                  "    bool claims_done = true;\n"
                  "    unsigned pending = 0, pending2 = 0;\n", 1)
    tile_of = r"\(j_first \+ \(chunks \* \(?(t_begin \+ (\d)|t \+ \d|t)\)?\)\)"
    lines = s.split("\n")
    out = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        # A copy site: the prologue's `if (t_begin + N < t_end) { if (threadIdx.x == 0) { expect; load } }`
        # or the loop's refill `if (t + S-1 < t_end) { if (threadIdx.x == 0) { fence; expect; load } }`.
        m = re.match(r"^(\s*)if \((t_begin \+ (\d)|t \+ \d) < t_end\) \{$", ln)
        if m:
            ind, n = m.group(1), m.group(3)
            body = lines[i + 2:i + (4 if n is not None else 5)]
            expect, load = body[-2], body[-1]
            is_k = "k_s_full" in expect
            bar = re.search(r"\((\w+_full \+ (\d|\(stage_t \+ \d\) % \d))", expect).group(1)
            slot = f"claim_slot[{n}]" if n is not None else f"claim_slot[(stage_t + {ahead}) % {stages}]"
            out.append(f"{ind}if (threadIdx.x == 0) {{")
            if is_k and n is not None:   # a fixed first tile
                out.append(f"{ind}    {{ const int c = j_first + chunks * {n}; {slot} = c < n_vis ? c : n_vis; }}")
            elif is_k:                   # a claimed tile: the claim issued an iteration ago
                out.append(f"{ind}    int c = n_vis;")
                out.append(f"{ind}    if (!claims_done) {{")
                out.append(f"{ind}        c = chunks * {ahead} + int(pending);")
                if deep:
                    out.append(f"{ind}        if (c < n_vis) pending = pending2, pending2 = atomicAdd(claims, 1u);")
                else:
                    out.append(f"{ind}        if (c < n_vis) pending = atomicAdd(claims, 1u);")
                out.append(f"{ind}        else claims_done = true, c = n_vis;")
                out.append(f"{ind}    }}")
                out.append(f"{ind}    {slot} = c;")
            out.append(f"{ind}    if ({slot} < n_vis) {{")
            out.extend(ind + "    " + b.strip() for b in body[:-1])
            out.append(ind + "    " + re.sub(tile_of, slot, load.strip()))
            out.append(f"{ind}    }} else nd::mbarrier_arrive_expect_tx({bar}, 0);")
            if n is not None and int(n) == ahead - 1 and not is_k:   # after the last fixed tile: the first claim
                out.append(f"{ind}    claims_done = !(j_first + chunks * {n} < n_vis);")
                out.append(f"{ind}    if (!claims_done) pending = atomicAdd(claims, 1u);")
                if deep:
                    out.append(f"{ind}    if (!claims_done) pending2 = atomicAdd(claims, 1u);")
            out.append(f"{ind}}}")
            i += len(body) + 4
            continue
        if re.match(r"^\s*for \(int t = t_begin; t < t_end; \+\+t\) \{$", ln):
            out.append(ln.replace("t < t_end", ""))
            i += 1
            continue
        m = re.match(r"^(\s*)nd::mbarrier_wait\(k_s_full \+ stage_t, phase_t\);$", ln)
        if m:
            out.append(ln)
            out.append(f"{m.group(1)}const int tile_t = claim_slot[stage_t];")
            out.append(f"{m.group(1)}if (tile_t >= n_vis) break;")
            i += 1
            continue
        ln = re.sub(tile_of, "tile_t", ln)
        m = re.match(r"^(\s*)if \((nd::last_arrival\(.*\)|\(chunks == 1\))\) \{$", ln)
        if m:
            out.append(ln)
            out.append(f"{m.group(1)}    if (threadIdx.x == 0) *claims = 0u;")
            i += 1
            continue
        out.append(ln)
        i += 1
    text = "\n".join(out)
    if "j_first + (chunks" in text or "t_end)" in text or "claim_slot[0] = " not in text:
        sys.exit("claim_patch: a tile expression or loop bound was left unpatched in " + src)
    open(dst, "w").write(text)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = set(sys.argv[1:]) - set(args)
    if len(args) != 2 or flags - {"--spread", "--no-claims", "--deep"}:
        sys.exit(__doc__)
    main(args[0], args[1], "--spread" in flags, "--no-claims" not in flags, "--deep" in flags)
