#ifndef NEPTUNE_LOWER_LOWER_OPERATOR_H
#define NEPTUNE_LOWER_LOWER_OPERATOR_H
/** \file
 * An attention operator of the suite, from its Halide algorithm through its Neptune schedule to a
 * tile program: what the GPU backend compiles and the interpreter checks on the CPU. */
#include <map>
#include <string>

#include "neptune/Operators.h"
#include "tir/IR.h"

namespace neptune::internal {

struct OperatorLowering {
    tir::Program program;
    std::map<std::string, int64_t> ints;  // every int parameter of the kernels, for this instance
};

/** What the caller chooses; 0 (or -1 for min_blocks) keeps default_lower_options' choice for `arch`. */
struct LoweringChoices {
    GpuArch arch = GpuArch::Sm80;
    int warps = 0, block_n = 0;
    int chunks = 4;  // decode: split-K chunks (a kernel parameter: the launcher may pass another)
    int min_blocks = -1;  // __launch_bounds__ blocks per SM; 0: none
    int wgmma = -1;  // sm_90a: 1 forces the wgmma path (CompileError if it cannot), 0 keeps mma.sync
    int overlap = -1;  // wgmma: 0 none, 1 async dots overlap the softmax, 2 and warpgroups take turns
    int stages = 0;  // pipelined copies of K and V in flight (cp.async or TMA ring)
    int unroll_chunks =
        0;  // decode's combine: chunks its loops have in flight (unroll_chunk_loops); 0 the default (4), 1 off
    int fold_combine = -1;  // decode: 1 the last block of each group combines (one kernel), 0 a combine kernel; -1: 1
    int interleave_chunks = -1;  // decode: 1 chunk c takes KV tiles c, c + chunks, ..., 0 a run of tiles; -1: by
        // the chunk count (decode_interleave_chunks). A kernel parameter too
    int warp_rows_combine = -1;  // decode: 1 the combine in warp-rows registers, 0 in mma fragments; -1: 1
    int two_pass_combine =
        -1;  // decode: 1 the combine ends the maximum over all chunks first, 0 one rolling pass; -1: 0
    int cluster_merge =
        -1;  // decode, sm_90a: 1 a group's chunk blocks are a cluster merging through shared memory; -1, 0: not
    int key_warps = 0;  // decode: warps per block splitting each KV tile along the keys; 0 or 1: one warp
    int tma_loads = -1;  // sm_90a mma.sync kernels: 1 the pipelined K/V copies by TMA, 0 cp.async; -1: the default
    int tma_l2_promotion = -1;  // bytes the L2 fetches per TMA miss: 0, 64, 128 or 256; -1: the default
};

/** Lowers `inst`: prefill rolls over KV tiles of block_n keys; decode splits them into chunks. */
OperatorLowering lower_operator(const OperatorInstance &inst, const LoweringChoices &choices = {});

}  // namespace neptune::internal

#endif
