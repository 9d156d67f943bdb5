#ifndef NEPTUNE_LOWER_INTERLEAVE_CHUNKS_H
#define NEPTUNE_LOWER_INTERLEAVE_CHUNKS_H
/** \file
 * Deals a split-K partial kernel's KV tiles out to its chunks round-robin: the block of chunk c
 * takes tiles c, c + chunks, c + 2 chunks, ... of the visible range. A (batch, KV head) group's blocks
 * then stream neighbouring tiles at the same time instead of runs a chunk's length apart, which the
 * H200's memory serves about 1 % faster (perf-log.md, session 18), and a range that skip_masked_tiles
 * narrowed (a window) stays spread over every chunk instead of falling to a few. */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards, with `on` and a kernel with a scalar `chunk` and an int parameter `chunks` (the
 * partial kernel): its top-level KV loop over j in [begin, end) runs over t with j = first + chunks * t,
 * first the least j >= begin that is chunk modulo chunks. Requires: build_tile_program with
 * interleave_chunks (the loop over every tile), skip_masked_tiles (which bounds j, not t). Leaves:
 * other kernels; everything when `on` is false.
 *   before: for j in [0, n_tiles) { body(j) }
 *   after:  j_first = chunk; n_own = max((n_tiles - j_first + chunks - 1) / chunks, 0)
 *           for t in [0, n_own) { body(j_first + chunks * t) } */
tir::Kernel interleave_chunks(const tir::Kernel &k, bool on);

}  // namespace neptune::internal

#endif
