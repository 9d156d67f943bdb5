#ifndef NEPTUNE_LOWER_MULTICAST_LOADS_H
#define NEPTUNE_LOWER_MULTICAST_LOADS_H
/** \file
 * multicast_loads: blocks that load the same tile share the copy. In a warp-specialized kernel whose
 * ring loads include one whose coordinates do not depend on block_x (the matmul-fed pattern's
 * vocabulary tile, the same for every row tile), `cluster` consecutive blocks along x become a thread
 * block cluster, and each block's producer copies 1/cluster of that tile's rows into the buffer of
 * every block of the cluster (TMA multicast): the tile crosses from L2 once per cluster instead of
 * once per block, which is what bounds a GEMM whose tiles stream from L2.
 *
 * Afterwards: the kernel has cluster_x = `cluster` and its grid_x is a multiple of it (the extra blocks
 * run with no valid rows); those loads have `multicast` = `cluster`, and their tensor maps' boxes are
 * rows / cluster high; a ring buffer goes back to the producers once every block of the cluster has
 * released it (the emitter arrives on each block's empty barrier).
 * Requires specialize_warps (rings and producer warps). Leaves kernels without such loads, or with
 * clusters already, as they are.
 *
 *   before:  b_s = load weight[0, kk, j * 192]  // tma; ring step
 *   after:   b_s = load weight[0, kk, j * 192]  // tma, multicast to 2 blocks; ring step  (cluster 2 x 1 x 1) */
#include "tir/IR.h"

namespace neptune::internal {

tir::Kernel multicast_loads(const tir::Kernel &k, int cluster);

}  // namespace neptune::internal

#endif
