#ifndef NEPTUNE_LOWER_SPECIALIZE_WARPS_H
#define NEPTUNE_LOWER_SPECIALIZE_WARPS_H
/** \file
 * Warp specialization for the Hopper path: a producer warpgroup fills the swizzled shared tiles with
 * TMA copies, a ring of `stages` buffers ahead, while the compute warpgroups run the program. */
#include "tir/IR.h"

namespace neptune::internal {

/** For kernels whose dots select_mma made wgmma dots; others are returned as they are.
 * Afterwards: every load into a swizzled tile has copy = Tma (stage 0 inside the loop: a ring of
 * kernel.pipeline_stages = `stages` buffers rotated by iteration; loads outside the loop get one
 * buffer); kernel.tensor_maps holds one descriptor per (tensor, box rows), whose misses fetch
 * `l2_promotion` bytes into the L2; kernel.producer_warps = 4
 * with register budgets for both roles (setmaxnreg); and a Release(tile) follows the last statement
 * of the loop body that reads each ring tile, which is when the producer may refill its buffer.
 * In the emitted kernel the compute warps wait at each TMA load for its copy, the producer issues
 * the loads in program order, each into a buffer released by the consumers of `stages` iterations ago.
 *   before: for j { k_s = load k[...]; s = dot(q_s, k_s^T); ... }
 *   after:  for j { k_s = load k[plane .., row j * 128]  // tma stage 0
 *                   s = dot(q_s, k_s^T); release k_s; ... }
 * Requires: select_mma. Replaces pipeline_loads for these kernels. */
tir::Kernel specialize_warps(const tir::Kernel &k, int stages, int l2_promotion);

}  // namespace neptune::internal

#endif
