#ifndef NEPTUNE_CORE_SPLIT_CHUNKS_H
#define NEPTUNE_CORE_SPLIT_CHUNKS_H
/** \file
 * How many split-K chunks a decode launch uses: one heuristic (PERFORMANCE.md §6.2, simplified),
 * Halide-free, shared by the lowering (internal::choose_split_chunks) and by the run-time launcher
 * of AOT libraries, which picks chunks per device and shape. */
#include <cstdint>

namespace neptune::internal {

/** Chunks for `blocks` (batch x KV heads) blocks over `tiles` KV tiles on `sms` SMs: about two
 * blocks per SM, whole tiles per chunk, at least 1. */
int split_k_chunks(int64_t blocks, int64_t tiles, int sms);

}  // namespace neptune::internal

#endif
