#ifndef NEPTUNE_LOWER_LOWER_H
#define NEPTUNE_LOWER_LOWER_H
/** \file
 * Lowering a fused reduction group to a tile program: the ordered list of
 * passes (Lower.cpp) and the options they read. */
#include <string>
#include <vector>

#include "Halide.h"
#include "frontend/FusedPlan.h"
#include "neptune/DType.h"
#include "tir/IR.h"

namespace neptune::internal {

using neptune::GpuArch;

struct LowerOptions {
    GpuArch arch = GpuArch::Sm80;
    DType dtype = DType::F16;
    int head_dim_qk = 128, head_dim_v = 128;  // padded to multiples of 16 inside the kernel
    int warps = 4;  // 16 query rows per warp: block_m = 16 * warps
    int block_n = 64;  // keys per tile (the plan's tile)
    int stages = 2;  // pipelined copies of K and V
    bool decode = false;  // one query row per head: rows are the heads of a KV group
    int min_blocks_per_sm = 0;  // occupancy target for the register allocator (0: none)
    bool wgmma = false;  // sm_90a: wgmma + TMA + warp specialization for the rolling kernel
    int overlap = 2;  // wgmma: 0 none, 1 dots overlap the softmax, 2 and warpgroups take turns
    int unroll_chunks = 1;  // loops over global loads only (split-K combine): chunks in flight; 1 off
    bool fold_combine = true;  // split-K: the last block of each group combines (one kernel)
    bool cluster_merge = false;  // split-K, folded: a group's chunk blocks are a cluster merging
        // through shared memory (sm_90a; fold_combine)
    bool tma_loads = false;  // sm_90a mma.sync kernels: the pipelined K/V copies by TMA
        // (one thread per tile, mbarriers) instead of cp.async
    int tma_l2_promotion = 256;  // bytes the L2 fetches per TMA miss (0, 64, 128, 256)
    int64_t row_cols = 0;  // row chains: the row length when known (picks the kernel shape); 0: any
    int64_t rows = 0;  // row chains: the number of rows when known (few long rows split); 0: any
    int multicast = 1;  // sm_90a warp-specialized kernels: blocks per cluster sharing a tile's copy (multicast_loads)
    int row_threads = 0;  // row chains: threads per row, a power of two from 32 to 1024 (0: by length)
    int row_cluster = 0;  // row chains: blocks per row, 1 to 8 (above 1: sm_90a clusters; 0: by length)
};

/** The options Neptune picks for an attention group on `arch` when the user names none: `group` is
 * the query heads per KV head; `decode` one query row per head (split-K). On sm_90a, prefill with
 * head dims that are multiples of 64 (up to 256) takes the wgmma path: two compute warpgroups of 64
 * rows and a TMA producer warpgroup, 192-key tiles (128 under a window mask, `windowed`; 64 above head
 * dim 128, for shared memory); other
 * shapes and decode keep the mma.sync kernels (compiled for sm_90a). Decode pipelines 3 stages of K
 * and V (on sm_90a by TMA in its own loop, 128-byte L2 promotion), prefill's mma.sync kernels 2 (by
 * cp.async). */
LowerOptions default_lower_options(GpuArch arch, DType dtype, int head_dim_qk, int head_dim_v, bool decode, int group,
                                   bool windowed = false);

/** Empty when the tile backend lowers `plan` with these outputs (the pure Funcs after the chain): one
 * of its patterns (src/lower/Patterns.h) recognises it. Else, for each pattern, why the plan is not of
 * its shape, naming the stage or Func at fault: callers ask this before any lowering option matters
 * (the head dims of extern stages), so that a refusal gives the real reason. */
std::string lowering_refusal(const FusedPlan &plan, const std::vector<Halide::Func> &outputs);

/** The tile program of a fused plan, by the pattern it matches (src/lower/Patterns.h). Of an
 * attention-shaped plan: the scores are a dot product of two inputs
 * (q(d, i, h, b) . k(d, kv, hk, b)) followed by elementwise modifiers and a mask; the targets are
 * row reductions of elementwise functions of the scores, or dot products of such functions with
 * a third input v(e, kv, hk, b). `outputs` are the pure Funcs after the chain (the epilogue).
 * Rolling plans give one kernel; split-K plans a partial kernel and a combine kernel. A row chain
 * (BuildRowChain.h) gives one kernel, which the attention passes leave alone.
 * Throws CompileError naming every pattern's reason when the plan matches none. NEPTUNE_DEBUG=2 prints the program after
 * each pass. */
tir::Program lower_to_tiles(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt);

/** Whether the plan's mask hides keys before some query tile's first visible key (a sliding window:
 * skip_masked_tiles then starts the KV loop past zero), so that default_lower_options' `windowed`
 * can be decided from a plan where no OperatorSpec says it (extern stages of user algorithms). */
bool skips_leading_tiles(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt);

}  // namespace neptune::internal

#endif
