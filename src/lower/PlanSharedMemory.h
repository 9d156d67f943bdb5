#ifndef NEPTUNE_LOWER_PLAN_SHARED_MEMORY_H
#define NEPTUNE_LOWER_PLAN_SHARED_MEMORY_H
/** \file
 * Shared-memory planning: byte offsets for every shared tile, its pipeline buffers included, with
 * the Q tile aliased onto a pipeline buffer that is not written before Q moves to registers. */
#include <map>
#include <string>

#include "tir/IR.h"

namespace neptune::internal {

/** Where each shared tile's buffers start (stage s of a pipelined tile at offset + s * bytes). */
struct SharedLayout {
    std::map<std::string, int> offset;
    std::map<std::string, int> buffers;  // 1, or pipeline_stages for tiles loaded in the loop
    int total = 0;
};

/** Tile bytes as the device library lays them out: rows * (cols + 8) elements (16 B of padding). */
int shared_tile_bytes(const tir::TileType &t);

/** Afterwards: kernel.shared_bytes is set. Requires pipeline_loads. Throws CompileError when the
 * kernel needs more than the 227 KB a block may have on sm_90.
 * Loaded once before the loop and converted to registers before it, Q shares the last stage of a
 * pipelined tile of the same size: the loop writes that stage only after its first barrier. */
tir::Kernel plan_shared_memory(const tir::Kernel &k);
SharedLayout shared_layout(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
