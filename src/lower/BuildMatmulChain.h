#ifndef NEPTUNE_LOWER_BUILD_MATMUL_CHAIN_H
#define NEPTUNE_LOWER_BUILD_MATMUL_CHAIN_H
/** \file
 * The matmul-fed pattern: a row chain whose x is a matrix product x(c, r) = sum_k a(k, r) * b(k, c)
 * (a language model's logits h * W^T, reduced over the vocabulary by log-sum-exp and a gathered
 * label logit: linear + cross-entropy). The product is never stored: each block owns block_m rows
 * and steps over (column tile, depth chunk) pairs, accumulating a column tile of x on the tensor
 * cores from 64-column chunks of a and b; when a column tile is complete, the chain's stages update
 * their row states from it with the plan's derived repair (the online form). Split-K (the plan's
 * split_k_update) deals the column tiles out to `chunks` blocks per row tile, which store their
 * states; a combine kernel merges them with the same repair. See docs/design/lowering.md,
 * "Patterns". */
#include <string>
#include <vector>

#include "lower/Lower.h"

namespace neptune::internal {

/** Why the plan is not a chain over a matrix product, in words a user can act on; empty when it is. */
std::string matmul_chain_mismatch(const FusedPlan &plan, const std::vector<Halide::Func> &outputs);

/** The program: int parameters rows, cols and depth (a is [rows, depth], b [cols, depth], both
 * dense) and, split, chunks; outputs f32 or 16-bit per row. `opt.warps` compute warps of 16 rows,
 * `opt.block_n` columns per tile (a multiple of 16); wgmma needs depth a multiple of 64 (TMA reads
 * 64-column boxes). Throws CompileError naming the construct it cannot lower. */
tir::Program build_matmul_chain(const FusedPlan &plan, const std::vector<Halide::Func> &outputs,
                                const LowerOptions &opt);

}  // namespace neptune::internal

#endif
