#ifndef NEPTUNE_LOWER_UNROLL_CHUNK_LOOPS_H
#define NEPTUNE_LOWER_UNROLL_CHUNK_LOOPS_H
/** \file
 * Unrolling of the loops that only read global memory into registers, such as the split-K combine's
 * loops over chunks: each iteration waits for one global-load round trip, and at batch 1 with 30-odd
 * chunks and a handful of combine blocks those trips are most of the decode time. Unrolled, the
 * iterations' independent loads are issued together. */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards: every top-level CarriedLoop whose body loads from global memory (TileLoad into
 * registers, RowLoad) and holds no shared tile, nested loop, condition, barrier or dot has
 * unroll = `factor`, or 2 at most where it loads a tile (one more register tile per unrolled
 * iteration); the emitter writes `#pragma unroll N`. factor <= 1: the kernel unchanged.
 * Requires: pipeline_loads (its loops over shared tiles are left alone). */
tir::Kernel unroll_chunk_loops(const tir::Kernel &k, int factor);

}  // namespace neptune::internal

#endif
