#ifndef NEPTUNE_LOWER_SKIP_MASKED_TILES_H
#define NEPTUNE_LOWER_SKIP_MASKED_TILES_H
/** \file
 * Mask-aware tile skipping (docs/design/fusion.md, masks and score modifiers): a fully masked KV tile contributes the
 * identity to every stage, so it is skipped exactly; a fully visible tile needs no mask arithmetic. */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards: a KV loop whose mask map is select(C(row, col, j), s, -inf) runs only over the tiles
 * where C can hold (bounds from Halide's interval solver over the tile's rows and columns), and the
 * mask map runs only on tiles where C may fail somewhere (diagonal, window edge, last partial tile).
 * Requires: build_tile_program. Leaves: loops without a mask map.
 *   before: for j in [0, n_tiles) { ...; s = map(select(kv <= q, s, -inf)); ... }
 *   after:  for j in [0, min(n_tiles, (q0 + 63) / 64 + 1)) { ...; if (!visible(j)) { s = map(...) } ... } */
tir::Kernel skip_masked_tiles(const tir::Kernel &k, int block_n);

}  // namespace neptune::internal

#endif
