#ifndef NEPTUNE_CORE_SPLIT_CHUNKS_H
#define NEPTUNE_CORE_SPLIT_CHUNKS_H
/** \file
 * How many split-K chunks a decode launch uses: one heuristic, Halide-free, shared by the JIT
 * operator (GpuOperator) and by the run-time launcher of AOT libraries, both of which pick chunks per
 * device and shape. Calibrated on the H200 (docs/engineering-log.md, 2026-12-01, the folded combine and
 * the chunk rule). And the partial kernel's
 * tuning for a shape, its keys per tile and stages: the JIT operator compiles the one its shape
 * needs; an AOT stage carries one kernel set per tuning and its launcher takes the one these rules
 * pick (interop/Descriptor.h, choose_kernel_set). */
#include <cstdint>
#include <map>
#include <string>

namespace neptune::internal {

/** Chunks for `blocks` (batch x KV heads) partial blocks over `keys` keys in KV tiles of `tile_keys`
 * on `sms` SMs, each holding `resident` partial blocks at once (shared memory decides it):
 *  - fewer than 2 blocks per SM: enough chunks for about two blocks per SM, but at most about
 *    sqrt(keys / 32): a chunk streams keys / c keys while the combine walks c chunks, and the two
 *    costs per 32-key tile and per chunk measured about equal; and never more than one wave of `resident` x
 *    `sms` blocks (key-split blocks of several warps fit fewer per SM); then up to a quarter fewer
 *    where the busiest SM gets fewer tiles: decode_gqa 8,8192's 64 groups in 5 chunks put 3 blocks
 *    on 56 SMs and 2 on the rest, and ran 2 % slower than in 4 chunks, 2 blocks on every SM but 8
 *    (docs/engineering-log.md, 2026-12-03, the chunk rule evens out the SMs);
 *  - more: 1 to 4 chunks, the fewest that fill the last wave of `resident` x `sms` blocks best.
 * Always whole tiles per chunk, at least 1 and at most 64 chunks. */
int split_k_chunks(int64_t blocks, int64_t keys, int tile_keys, int sms, int resident);

/** Keys per tile of decode's one-warp partial kernel for `blocks` (batch x KV heads) groups on `sms`
 * SMs at head dimension `head_dim`: 64 where the split-K chunks leave at most one block per SM (16
 * chunks per group or more: a warp's latency along its chunk bounds the rate, and a 64-key tile
 * halves the steps per key: waits, barrier, row reductions, rescales), else 32 (smaller buffers, more
 * blocks per SM). Head dims above 128 keep 32: their 64-key kernel spills. decode_gqa 1,8192 27.0 ->
 * 25.0 us on the H200; no gain at 2 groups per SM or more (docs/engineering-log.md, 2026-12-03, 64-key
 * tiles where groups are few). */
int decode_block_n(int64_t blocks, int sms, int head_dim);

/** The pipeline depth of decode's one-warp partial kernel for `blocks` (batch x KV heads) groups on
 * `sms` SMs: 3 stages where there are fewer groups than SMs (split-K chunks fill the machine and a
 * warp's own latency along its chunk bounds the rate, so a third tile in flight pays), 2 where every
 * SM already has a group (the smaller blocks fit 6 per SM instead of 4). Measured on the H200 with
 * TMA copies (docs/engineering-log.md, 2026-12-02, TMA copies in decode's loop): decode_causal 8,8192 (256 groups) 4.29
 * -> 4.32 TB/s with 2, decode_gqa 8,8192 (64 groups) 3.37 with 3 against 3.32 with 2. */
int decode_stages(int64_t blocks, int sms);

/** Whether decode's `chunks` chunks take their tiles round-robin (the partial kernel's `interleave`
 * parameter, lower/DealChunkTiles.h) rather than in runs: where they are 4 or fewer. Measured on the
 * H200 (docs/engineering-log.md, 2026-12-03, the order of a chunk's tiles): decode_causal 8,8192 (2 chunks) 251.6
 * against 253.2 us in runs, decode_gqa 8,8192 (4) 79.2 against 79.7; decode_gqa 4,8192 (8) 49.5 against 49.2 and
 * decode_gqa 1,8192 (16) 25.5 against 25.0, a block's stream then jumping 8 or 16 tiles at every step. */
bool decode_interleave_chunks(int64_t chunks);

/** Whether `param` is a split-K kernel parameter the launch picks (not a shape scalar of the stage):
 * "chunks", "interleave" or "chunk_tiles". */
bool is_split_k_launch_param(const std::string &param);

/** Sets decode's launch-picked parameters in `ints`: "chunks", "interleave" from
 * decode_interleave_chunks(chunks), and "chunk_tiles" (0: the chunks share out each sequence's
 * tiles; above 0: runs of that many tiles, batch-invariant, lower/DealChunkTiles.h). */
void set_split_k_params(std::map<std::string, int64_t> &ints, int64_t chunks, int64_t chunk_tiles = 0);

/** The most chunks a cluster merge takes: the portable thread block cluster size. */
constexpr int kMaxClusterChunks = 8;

/** Whether decode's folded combine merges each group's chunks in a thread block cluster (through
 * shared memory, lower/FoldCombine.h) rather than through the workspace and an arrival counter:
 * `choice` 1 yes, 0 no, -1 on sm_90a where the chunks make a portable cluster (2 to 8) of one-warp
 * blocks (the combine folded). The workspace fold ends ~2 us after the last
 * stream at decode_causal 8,8192; with the cluster merge 251.35 against 252.0 us there (pairs against
 * cuDNN 0.995-0.997 -> 1.000), 78.75 against 79.1 at decode_gqa 8,8192, level at 2-4 chunks of
 * decode_causal 2 and 4,8192 (docs/engineering-log.md, 2026-12-04, the cluster merge). */
bool use_cluster_merge(int choice, int64_t chunks, bool sm90a, int fold_combine, int warps);

/** Blocks of `shared_bytes` of shared memory each that an SM holds, at least 1, where a block may opt
 * in to `max_shared_per_block` bytes (the device's figure: the SM's shared memory less the 1 KB the
 * driver reserves per block; 227 KB on an H100 or H200). */
int resident_blocks(int shared_bytes, int max_shared_per_block);

}  // namespace neptune::internal

#endif
