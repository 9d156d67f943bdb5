#ifndef NEPTUNE_LOWER_SKIP_IDENTITY_REPAIRS_H
#define NEPTUNE_LOWER_SKIP_IDENTITY_REPAIRS_H
/** \file
 * The rolling repair of a carried accumulator, skipped by the warps where it is the identity. Each KV
 * tile rescales the accumulator by exp(m_old - m_new) row by row: 64 multiplications per lane and a
 * MUFU exponential per row at head dim 128, about 15 % of a decode tile's instructions. Once the
 * running maximum has settled, no row's maximum moves and the factor is exactly 1 (exp(0)), so a warp
 * whose rows all kept their maximum may skip both the factor and the product, bit for bit the same
 * result. Decode's one-warp kernels are bound by how fast a warp issues (perf-log.md, session 17). */
#include "tir/IR.h"

namespace neptune::internal {

/** Afterwards, in the carried loops of kernels without producer warps: a row map F = f(...) followed
 * by an mma-accumulator map X = X * F (or F * X), F read nowhere else, where f holds one exponential
 * of g(u) - g(v) (or of (g(u) - g(v)) * c) for row vectors u and v, and f with that exponential
 * replaced by 1 simplifies to 1, becomes `if (any row of a warp: u != v) { F = ...; X = X * F }`. */
tir::Kernel skip_identity_repairs(const tir::Kernel &k);

}  // namespace neptune::internal

#endif
