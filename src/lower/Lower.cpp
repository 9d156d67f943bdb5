#include "lower/Lower.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "lower/BuildTileProgram.h"
#include "lower/DealChunkTiles.h"
#include "lower/DeferScoreScale.h"
#include "lower/FoldCombine.h"
#include "lower/FoldConstantScales.h"
#include "lower/HoistRowInvariants.h"
#include "lower/LayOutCombine.h"
#include "lower/MulticastLoads.h"
#include "lower/OverlapDots.h"
#include "lower/Patterns.h"
#include "lower/PipelineDots.h"
#include "lower/PipelineLoads.h"
#include "lower/PlanSharedMemory.h"
#include "lower/SelectMma.h"
#include "lower/ShareTileTerms.h"
#include "lower/SkipMaskedTiles.h"
#include "lower/SpecializeWarps.h"
#include "lower/SwizzleSharedTiles.h"
#include "lower/UnrollChunkLoops.h"

namespace neptune::internal {

namespace {

// NEPTUNE_DEBUG=2 prints the program after each pass; NEPTUNE_TIME_PASSES=1 prints pass times.
class PassLog {
public:
    PassLog() {
        const char *d = std::getenv("NEPTUNE_DEBUG");
        print_ = d && std::atoi(d) >= 2;
        time_ = std::getenv("NEPTUNE_TIME_PASSES") != nullptr;
        last_ = std::chrono::steady_clock::now();
    }
    void operator()(const char *pass, const tir::Program &p) {
        const auto now = std::chrono::steady_clock::now();
        if (time_)
            std::fprintf(stderr, "[neptune] %-22s %8.3f ms\n", pass,
                         std::chrono::duration<double, std::milli>(now - last_).count());
        last_ = now;
        tir::verify(p);
        if (print_) std::fprintf(stderr, "[neptune] after %s:\n%s\n", pass, tir::to_string(p).c_str());
    }

private:
    bool print_ = false, time_ = false;
    std::chrono::steady_clock::time_point last_;
};

template <typename F>
tir::Program each_kernel(tir::Program p, F f) {
    for (tir::Kernel &k : p.kernels) k = f(k);
    return p;
}

}  // namespace

LowerOptions default_lower_options(GpuArch arch, DType dtype, int head_dim_qk, int head_dim_v, bool decode, int group,
                                   bool windowed) {
    LowerOptions o;
    o.arch = arch;
    o.dtype = dtype;
    o.head_dim_qk = head_dim_qk;
    o.head_dim_v = head_dim_v;
    o.decode = decode;
    // Prefill: 4 warps of 16 rows, 64-key tiles, capped for 3 blocks per SM (docs/performance.md).
    // Decode: the query heads of a KV group are the rows; 32-key tiles keep buffers small.
    o.warps = decode ? (group + 15) / 16 : 4;
    o.block_n = decode ? 32 : 64;
    o.min_blocks_per_sm = decode ? 0 : 3;
    // Decode: 3 cp.async stages. Where a warp's own latency bounds the rate (batch x KV heads below the
    // SM count, so split-K chunks fill the machine) a third tile in flight gains 2-7 %; with many
    // groups it costs about 1 % of residency (docs/engineering-log.md, 2026-12-01, 3 decode stages).
    o.stages = decode ? 3 : 2;
    // Decode's combine loops take 4 chunks' loads at once, the loop padded to a multiple of 4: each
    // round trip the combine waits for is in the kernel's tail. 8 (what 128 registers allow over 4-row
    // strips) measured no better, 4 than 2 up to 5 % better at batch 1 (docs/engineering-log.md,
    // 2026-12-01, unrolled chunk loops, and 2026-12-02, the combine's loads in flight).
    o.unroll_chunks = decode ? 4 : 1;
    // Decode on sm_90a: the K/V copies by TMA, one thread issuing one instruction per 64-column box
    // instead of 16 cp.async per lane and tile (166 registers instead of 241), with 128-byte L2
    // promotion: 256 bytes, right for prefill, costs decode's streams 5 % (docs/engineering-log.md,
    // 2026-12-02, TMA copies in decode's loop and the L2 promotion).
    o.tma_loads = decode && arch == GpuArch::Sm90a;
    o.tma_l2_promotion = decode ? 128 : 256;
    const bool fits = head_dim_qk % 64 == 0 && head_dim_v % 64 == 0 && head_dim_qk <= 256 && head_dim_v <= 256 &&
                      dtype_bytes(dtype) == 2;
    if (arch == GpuArch::Sm90a && !decode && fits) {
        // Q (128 rows) + 2 stages of K and V: 224 KB at head dim 128 with 192 keys, 192 KB at 256 with 64.
        // 192-key tiles take a third fewer steps per key than 128, and each step pays barriers, turns,
        // row reductions and rescales: prefill_global 1,8192 609 -> 638 TFLOP/s, prefill_causal 580 ->
        // 601, prefill_gqa 578 -> 601 (docs/engineering-log.md, 2026-12-03, KV tiles of 128 to 192 keys on
        // the sm_90a prefill path). A 4096-key window spans 21.3 tiles of
        // 192, more of them partly masked than of 128: prefill_windowed 304 with 128, 297 with 192.
        o.wgmma = true;
        o.warps = 8;
        o.block_n = std::max(head_dim_qk, head_dim_v) <= 128 ? (windowed ? 128 : 192) : 64;
        o.min_blocks_per_sm = 1;
    }
    return o;
}

std::string lowering_refusal(const FusedPlan &plan, const std::vector<Halide::Func> &outputs) {
    const PatternMatch m = match_pattern(plan, outputs);
    return m ? "" : m.why();
}

tir::Program lower_to_tiles(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt) {
    PassLog log;
    tir::Program p = build_pattern(plan, outputs, opt);
    log("build_tile_program", p);
    if (p.kernels.at(0).strip_threads) return p;  // a row chain: the passes below are for dots
    p = each_kernel(p, [&](const tir::Kernel &k) { return skip_masked_tiles(k, opt.block_n); });
    log("skip_masked_tiles", p);
    p = each_kernel(p, deal_chunk_tiles);  // deals out the tiles skipping left
    log("deal_chunk_tiles", p);
    p = each_kernel(p, defer_score_scale);  // before hoisting, which folds the scale into the exp's FFMA
    log("defer_score_scale", p);
    p = each_kernel(p, hoist_row_invariants);  // after skipping: the mask map stays per element
    log("hoist_row_invariants", p);
    p = each_kernel(p, fold_constant_scales);  // a softcap's division by its cap, as a multiplication
    log("fold_constant_scales", p);
    p = each_kernel(p, share_tile_terms);  // after hoisting: terms compare equal through its row vectors
    log("share_tile_terms", p);
    p = each_kernel(p, [&](const tir::Kernel &k) { return select_mma(k, opt.wgmma); });
    log("select_mma", p);
    p = each_kernel(p, swizzle_shared_tiles);  // the mma.sync kernels' shared layouts, as select_mma set wgmma's
    log("swizzle_shared_tiles", p);
    p = each_kernel(p, [&](const tir::Kernel &k) {
        return specialize_warps(k, opt.stages, opt.tma_l2_promotion);
    });  // TMA for select_mma's wgmma kernels
    log("specialize_warps", p);
    p = each_kernel(
        p, [&](const tir::Kernel &k) { return overlap_dots(k, opt.overlap); });  // needs specialize_warps' rings
    log("overlap_dots", p);
    p = each_kernel(p, pipeline_dots);  // the loops overlap_dots left whose one dot reads the rings
    log("pipeline_dots", p);
    p = each_kernel(p, [&](const tir::Kernel &k) { return multicast_loads(k, opt.multicast); });
    log("multicast_loads", p);  // the tensor maps specialize_warps made
    p = each_kernel(p, [&](const tir::Kernel &k) {
        return pipeline_loads(k, opt.stages, opt.tma_loads, opt.tma_l2_promotion);
    });  // the kernels left over
    log("pipeline_loads", p);
    p = fold_combine(p, opt.fold_combine, opt.cluster_merge);  // after each kernel's own passes
    log("fold_combine", p);
    p = lay_out_combine(p);  // the folded combine is a region of the partial kernel
    log("lay_out_combine", p);
    p = unroll_chunk_loops(p, opt.unroll_chunks);  // the loops pipeline_loads left, in their final layouts
    log("unroll_chunk_loops", p);
    p = each_kernel(p, plan_shared_memory);  // offsets depend on which loads are pipelined
    log("plan_shared_memory", p);
    return p;
}

bool skips_leading_tiles(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt) {
    const tir::Program p = build_tile_program(plan, outputs, opt);
    for (const tir::Kernel &k : p.kernels)
        for (const tir::Stmt &s : skip_masked_tiles(k, opt.block_n).body)
            if (s->kind == tir::NodeKind::CarriedLoop && !Halide::Internal::is_const(s->begin)) return true;
    return false;
}

}  // namespace neptune::internal
