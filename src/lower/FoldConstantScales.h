#ifndef NEPTUNE_LOWER_FOLD_CONSTANT_SCALES_H
#define NEPTUNE_LOWER_FOLD_CONSTANT_SCALES_H
/** \file
 * Division by constants in the elementwise maps, as multiplication: a score modifier written
 * cap * tanh(s * scale / cap) (softcapping) divides every score by cap, and an IEEE f32 division is
 * about ten instructions on the GPU (reciprocal, two Newton steps, a slow path for special values)
 * where a multiplication is one, in the per-score ALU work that must hide under the tensor cores. */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards, in every TileMap and RowMap: x / c with c a finite nonzero f32 constant is x * (1 / c),
 * the reciprocal rounded to f32 (the product is within an ulp or two of the quotient), and a product
 * of constants folds: (x * c1) * c2 is x * (c1 c2). Nothing else changes. */
tir::Kernel fold_constant_scales(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
