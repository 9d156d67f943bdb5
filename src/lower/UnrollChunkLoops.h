#ifndef NEPTUNE_LOWER_UNROLL_CHUNK_LOOPS_H
#define NEPTUNE_LOWER_UNROLL_CHUNK_LOOPS_H
/** \file
 * The split-K combine's loops over chunks, with several chunks' loads in flight. Each iteration of
 * such a loop waits for one global-load round trip; at batch 1, with 9 to 16 chunks per group, those
 * trips are a visible part of the decode time (docs/engineering-log.md, 2026-12-01, unrolled chunk
 * loops, and 2026-12-02, the combine's loads in flight). A plain
 * `#pragma unroll U` over a trip count known only at run time leaves a remainder loop that takes the
 * chunks one at a time (5 chunks unrolled by 2: three round trips), so the loop is padded to a
 * multiple of U instead: iterations past the last chunk load nothing (their slices have no valid rows)
 * and keep the carried state with a select rather than a branch, so the unrolled body is one straight
 * line the compiler can issue the loads of ahead of the merges. */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards: every CarriedLoop, at any depth, whose body loads from global memory into registers
 * (TileLoad, RowLoad) and holds no shared tile, nested loop, condition, barrier or dot has unroll = U,
 * with U = `factor`, fewer where the register tiles one iteration loads take more than 128 registers
 * per lane over U iterations (a 16-row mma fragment of 128 f32 columns in a one-warp kernel: 64, so
 * U = 2; a 4-row warp-rows strip: 16, so U up to 8); a loop of row-vector loads only (the split-K
 * combine's pass over the producers, a register each) takes 4 * factor, at most 16 (or factor if more).
 * Where the body is loads followed by maps and U > 1,
 * the loop runs to begin + ceil((end - begin) / U) * U; past `end` its loads have no valid rows and
 * each map that writes a carried value writes select(var < end, its value, the old one). Other bodies
 * get `#pragma unroll U` alone. factor <= 1: unchanged.
 * Requires: pipeline_loads (its loops over shared tiles are left alone) and lay_out_combine (the
 * budget counts the combine's final layouts). */
tir::Program unroll_chunk_loops(const tir::Program &p, int factor);

}  // namespace neptune::internal

#endif
