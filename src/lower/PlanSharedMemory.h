#ifndef NEPTUNE_LOWER_PLAN_SHARED_MEMORY_H
#define NEPTUNE_LOWER_PLAN_SHARED_MEMORY_H
/** \file
 * Shared-memory planning: byte offsets for every shared tile, its pipeline buffers included, with
 * the Q tile aliased onto a pipeline buffer that is not written before Q moves to registers. */
#include <map>
#include <string>

#include "tir/IR.h"

namespace neptune::internal {

/** Where each shared tile's buffers start (stage s of a pipelined tile at offset + s * bytes). With
 * TMA copies, the mbarriers follow the tiles: for each TMA-loaded tile one "full" barrier per buffer
 * (the copy landed), and for ring tiles one "empty" barrier per buffer (the consumers released it). */
struct SharedLayout {
    std::map<std::string, int> offset;
    std::map<std::string, int> buffers;  // 1, or pipeline_stages for tiles loaded in the loop
    std::map<std::string, int> full_barrier, empty_barrier;  // first barrier's byte offset, per TMA tile
    int total = 0;
    /** Offsets are relative to a base aligned to `alignment_slack` bytes (1024 with TMA, which swizzles
     * absolute addresses; 128 for swizzled tiles that only cp.async and ldmatrix touch; 0: 16); the
     * kernel asks for that many more bytes to align it. */
    int alignment_slack = 0;
};

/** Tile bytes as the device library lays them out: rows * (cols + 8) elements (16 B of padding)
 * row-major, rows * cols elements swizzled. */
int shared_tile_bytes(const tir::TileType &t);

/** Afterwards: kernel.shared_bytes is set (tiles, barriers and alignment slack). Requires pipeline_loads
 * or specialize_warps. Throws CompileError when the
 * kernel needs more than the 227 KB a block may have on sm_90.
 * Loaded once before the loop and converted to registers before it, Q shares the last stage of a
 * pipelined tile of the same size: the loop writes that stage only after its first barrier (not in
 * warp-specialized kernels, where wgmma reads Q from shared memory in every iteration). */
tir::Kernel plan_shared_memory(const tir::Kernel &k);
SharedLayout shared_layout(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
