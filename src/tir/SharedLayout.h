#ifndef NEPTUNE_TIR_SHARED_LAYOUT_H
#define NEPTUNE_TIR_SHARED_LAYOUT_H
/** \file
 * Where a kernel's shared tiles live: byte offsets for every shared tile, its pipeline buffers
 * included, and the mbarriers of TMA copies. A function of the tile program alone, so the lowering
 * (plan_shared_memory sizes the kernel with it) and the emitter (which addresses the tiles) compute
 * the same layout without depending on each other. */
#include <map>
#include <string>

#include "tir/IR.h"

namespace neptune::tir {

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
int shared_tile_bytes(const TileType &t);

/** The layout: pipelined tiles first, tiles used only after the loops in the ring's bytes, Q on the
 * last stage of a pipelined tile of its size (not with warp specialization), then barriers. */
SharedLayout shared_layout(const Kernel &k);

}  // namespace neptune::tir

#endif
