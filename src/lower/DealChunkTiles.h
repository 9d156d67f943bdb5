#ifndef NEPTUNE_LOWER_DEAL_CHUNK_TILES_H
#define NEPTUNE_LOWER_DEAL_CHUNK_TILES_H
/** \file
 * Deals a split-K partial kernel's KV tiles out to its chunks, in the order the launch picks: the
 * kernel's int parameter `interleave` is 1 for round-robin (chunk c takes tiles c, c + chunks, ... of
 * the visible range: a (batch, KV head) group's blocks stream neighbouring tiles together, about 1 %
 * faster on the H200 with a few chunks: docs/engineering-log.md, 2026-12-03, the order of a chunk's
 * tiles) and 0 for runs (chunk c takes the c-th
 * run of ceil(visible / chunks) tiles: 2 % faster at 16 chunks). One kernel serves both, so an AOT
 * library follows the chunk count it picks at run time. With the int parameter `chunk_tiles` above 0
 * every chunk is a run of that many tiles whatever the chunk count: a sequence's partition, and so its
 * result bit for bit, then depends on its own length alone, not on the batch it is in (chunks past its
 * tiles own none, and merging their empty states changes nothing). */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards, in a kernel with a scalar `chunk` and an int parameter `chunks` (the partial kernel):
 * the int parameters `interleave` and `chunk_tiles`, and its top-level KV loop over j in [begin, end) runs over t with
 * j = j_first + j_step * t. Requires: skip_masked_tiles (which bounds j, not t). Leaves: other kernels.
 *   before: for j in [begin, end) { body(j) }
 *   after:  j_end = end
 *           interleaved (interleave != 0): j_first = the least j >= begin that is chunk modulo chunks,
 *                                          j_step = chunks, n_own = ceil((end - j_first) / chunks)
 *           runs:                          j_first = begin + chunk * run, run = chunk_tiles if above 0,
 *                                          else ceil((end - begin) / chunks),
 *                                          j_step = 1, n_own = min(that run, end - j_first)
 *           for t in [0, max(n_own, 0)) { body(j_first + j_step * t) } */
tir::Kernel deal_chunk_tiles(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
