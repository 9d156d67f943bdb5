#ifndef NEPTUNE_SUITE_LOWER_OPERATOR_H
#define NEPTUNE_SUITE_LOWER_OPERATOR_H
/** \file
 * An attention operator of the suite, from its Halide algorithm through its Neptune schedule to a
 * tile program: what the GPU backend compiles and the interpreter checks on the CPU. It sits above
 * the lowering (src/lower/ lowers fused plans and knows no operator suite): here the suite's
 * algorithms (neptune/algorithms/) are built, fused and handed to lower_to_tiles. */
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
    int row_threads = 0;  // row chains: threads per row, a power of two from 32 to 1024; 0: by the row length
    int row_cluster = 0;  // row chains: blocks per row, 1 to 8 (above 1: a cluster, sm_90a); 0: by the row length
    int chunks = 4;  // decode: split-K chunks (a kernel parameter: the launcher may pass another)
    // decode: above 0, every chunk a run of this many KV tiles and as many chunks as the longest
    // sequence needs (overriding `chunks`): a sequence's result is then the same bit for bit in any batch
    int chunk_tiles = 0;
    int multicast = 0;  // linear + cross-entropy, sm_90a: row tiles per cluster sharing weight tiles (1 none), 0: 2
    int vocab_chunks =
        0;  // linear + cross-entropy: blocks sharing a row tile's vocabulary (split-K; 1 none), 0: by shape
    int min_blocks = -1;  // __launch_bounds__ blocks per SM; 0: none
    int wgmma = -1;  // sm_90a: 1 forces the wgmma path (CompileError if it cannot), 0 keeps mma.sync
    int overlap = -1;  // wgmma: 0 none, 1 async dots overlap the softmax, 2 and warpgroups take turns
    int stages = 0;  // pipelined copies of K and V in flight (cp.async or TMA ring)
    int unroll_chunks =
        0;  // decode's combine: chunks its loops have in flight (unroll_chunk_loops); 0 the default (4), 1 off.
    // Not a user option (the default measured best, docs/design/options.md): for the unroll pass's tests
    int fold_combine = -1;  // decode: 1 the last block of each group combines (one kernel), 0 a combine kernel; -1: 1
    int cluster_merge =
        -1;  // decode, sm_90a: 1 a group's chunk blocks are a cluster merging through shared memory; -1, 0: not
    int tma_loads = -1;  // sm_90a mma.sync kernels: 1 the pipelined K/V copies by TMA, 0 cp.async; -1: the default
};

/** Lowers `inst`: prefill rolls over KV tiles of block_n keys; decode splits them into chunks. */
OperatorLowering lower_operator(const OperatorInstance &inst, const LoweringChoices &choices = {});

}  // namespace neptune::internal

#endif
