#ifndef NEPTUNE_LOWER_HOIST_ROW_INVARIANTS_H
#define NEPTUNE_LOWER_HOIST_ROW_INVARIANTS_H
/** \file
 * Moves the row-invariant parts of elementwise tile maps into row-vector maps, and turns
 * exp(x - r) into one FFMA and one ex2: exp2(x * log2 e - r * log2 e) with r * log2 e per row. */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards: no TileMap evaluates a non-trivial sub-expression that reads neither a tile element
 * nor "col" (it is a RowMap into a new row vector before the map), and exp_f32 calls in tile maps
 * are fast_exp2 of a product with log2 e, the row-invariant part pre-multiplied per row.
 * Requires: build_tile_program. Leaves: maps without row-invariant work.
 *   before: p0 = map(exp(s - select(m_new == -inf, 0, m_new)))
 *   after:  p0_r0 = row_map(select(m_new == -inf, 0, m_new) * 1.4427)
 *           p0 = map(fast_exp2(s * 1.4427 - p0_r0)) */
tir::Kernel hoist_row_invariants(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
