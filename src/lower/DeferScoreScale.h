#ifndef NEPTUNE_LOWER_DEFER_SCORE_SCALE_H
#define NEPTUNE_LOWER_DEFER_SCORE_SCALE_H
/** \file
 * Folding a positive score scale (1/sqrt(d)) into the maps that read the scores, instead of a
 * multiply per score before them: the mask and the row maximum commute with it, and the
 * exponential absorbs it into the FFMA that hoist_row_invariants makes. */
#include "tir/IR.h"

namespace neptune::internal {

/** In each KV loop whose score modifier is s = map(s * c) with a constant c > 0: the map is gone,
 * s holds the raw dot until the first map that writes s with something other than a mask
 * (select(cond, s, -inf)), and until then every reader sees s * c: other maps read s * c, a row
 * maximum of s becomes c times the maximum of the raw tile (a row vector and one row map), a row
 * sum likewise. Loops where the raw tile would reach a dot or a conversion are left as they are.
 *   before: s = map(s * 0.088); m' = max(m', row_max(s)); p = map(exp(s - m'))
 *   after:  s_max = fill(-inf); s_max = max(s_max, row_max(s)); m' = row_map(max(m', s_max * 0.088))
 *           p = map(exp(s * 0.088 - m'))
 * Requires: build_tile_program; runs before hoist_row_invariants. */
tir::Kernel defer_score_scale(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
