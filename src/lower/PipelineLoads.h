#ifndef NEPTUNE_LOWER_PIPELINE_LOADS_H
#define NEPTUNE_LOWER_PIPELINE_LOADS_H
/** \file
 * Software pipelining of the KV loop's loads: each tile's K and V copies are issued `stages` - 1
 * iterations ahead into a ring of shared buffers, by cp.async (every thread a share of 16-byte
 * copies) or, on sm_90a, by TMA (one thread, one instruction per 64-column box, completing on an
 * mbarrier per buffer), in the same kernel: no producer warps. */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards: every TileLoad into a shared tile directly inside a CarriedLoop has stage = 0 (the
 * emitter rotates buffers by iteration) and copy = CpAsync, or copy = Tma where `tma` holds and the
 * load can take it (a swizzled tile of a tensor with a view, loaded by (batch, head, row)): those tensors
 * get a TensorMap with the tile's rows as box rows and `l2_promotion`. kernel.pipeline_stages = stages. The emitter
 * issues the first stages - 1 iterations' copies before the loop and, at each load, waits for this
 * iteration's copy, synchronizes the block (the buffer of the previous iteration is then free) and
 * issues the copy of iteration + stages - 1 into it. Loads outside loops stay synchronous.
 * Requires: build_tile_program; swizzle_shared_tiles (the layout TMA writes). Leaves: kernels
 * without loops over shared loads, and warp-specialized kernels (specialize_warps pipelines their
 * TMA copies). */
tir::Kernel pipeline_loads(const tir::Kernel &k, int stages, bool tma, int l2_promotion);

}  // namespace neptune::internal

#endif
