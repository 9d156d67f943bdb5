#ifndef NEPTUNE_LOWER_FOLD_COMBINE_H
#define NEPTUNE_LOWER_FOLD_COMBINE_H
/** \file
 * Folding split-K's combine kernel into its partial kernel: the last block of each (batch, KV head)
 * group to finish merges the group's chunk states itself, so decode is one launch instead of two, the
 * combine of one group overlaps the partials of the others, and the combine's loads hit L2 moments
 * after they were written. On the H200 that took decode from 3.79 to 3.85 TB/s at decode_causal 8,8192
 * and from 2.92 to 3.04 at decode_gqa 8,8192, and made more chunks affordable at B = 1 (docs/engineering-log.md,
 * 2026-12-01, the folded combine). */
#include "tir/IR.h"

namespace neptune::internal {

/** A program of a partial and a combine kernel with Program::fold set becomes one kernel: the
 * partial's body, then, with several arrivals per group, its workspace stores and a LastArrival on a
 * new zeroed workspace "ws_arrivals" (one counter per group) whose body is the combine's, with the
 * combine's block-dependent scalars rebound as `fold` says; with one arrival per group (one chunk), the
 * combine's epilogue (what follows its loop over chunks) on the partial's own state instead. The
 * partial kernel must take the combine's int parameters (and may take more), the kernels the same
 * float parameters and warps, and values of the same name on their types.
 * With `cluster` (sm_90's thread block clusters), a group's chunk blocks are one cluster instead
 * (Kernel::cluster_x = the grid's chunks): each block copies its state into shared f32 tiles
 * ("<state>_shared") and a ClusterMerge runs the combine in rank 0, its workspace loads become cluster
 * loads of chunk p's tiles; no workspace, counter or L2 round trip follows the streams (the workspace
 * fold ends ~2 us after the last stream at decode_causal 8,8192; the cluster merge took 0.3 % off it,
 * docs/engineering-log.md, 2026-12-04, the cluster merge). One chunk is a cluster of one. Needs one partial state per
 * block. `enabled` false, or any other program: unchanged. Requires: the kernels' own passes done (it runs before
 * plan_shared_memory). */
tir::Program fold_combine(const tir::Program &p, bool enabled, bool cluster = false);

}  // namespace neptune::internal

#endif
