#ifndef NEPTUNE_LOWER_SHARE_TILE_TERMS_H
#define NEPTUNE_LOWER_SHARE_TILE_TERMS_H
/** \file
 * Elementwise work computed once: a tile map whose expression contains the whole expression of an
 * earlier register tile's map (the same values: neither that tile nor anything its expression reads
 * written in between) reads that tile instead. Chains with several terms over the same scores
 * (attention with its entropy and largest probability) otherwise evaluate the same exponential
 * once per term and per element, where the tensor-core kernels are bound by exactly that unit. */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards: within each block of statements, no TileMap (without valid bounds) evaluates a
 * sub-expression that equals, up to row vectors defined by RowMaps in between and still current,
 * the expression of an earlier TileMap of a register tile of the same type that is still current.
 * Requires: hoist_row_invariants (its row vectors are what makes terms compare equal). Leaves: the
 * statements, names and roles; only map expressions change.
 *   before: p0 = map(fast_exp2(s * 0.1275 - p0_r0))
 *           p1 = map(fast_exp2(s * 0.1275 - p1_r0) * s)      with p1_r0 = p0_r0's expression
 *   after:  p1 = map(p0 * s) */
tir::Kernel share_tile_terms(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
