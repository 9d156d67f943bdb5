#ifndef NEPTUNE_LOWER_BUILD_TILE_PROGRAM_H
#define NEPTUNE_LOWER_BUILD_TILE_PROGRAM_H
/** \file
 * The first lowering pass: a fused plan of attention shape becomes a tile program, one
 * statement per step of the recurrence, every tile masked in full (later passes skip what
 * the mask allows). */
#include "lower/Lower.h"

namespace neptune::internal {

/** Afterwards: one kernel per launch (rolling: one; split-K: partials, then the combine). The KV
 * loop covers every tile and applies the mask to each (skip_masked_tiles narrows both); loads are
 * synchronous and unpipelined (pipeline_loads); shared tiles have no offsets (plan_shared_memory).
 *   rolling: q_a = convert(load q); for j: k_s = load k; s = dot(q_a, k_s^T); s = map(modifier(s));
 *            s = map(select(visible, s, -inf)); m_new = max(m, row_max(s)); l_new = l * exp(m - m_new)
 *            + row_sum(map(exp(s - m_new))); acc = acc * exp(m - m_new) + dot(convert(p), v_s); ...
 *            out = map(epilogue(acc, l)); store out */
tir::Program build_tile_program(const FusedPlan &plan, const std::vector<Halide::Func> &outputs,
                                const LowerOptions &opt);
/** Empty when build_tile_program recognises the plan as attention's: a max over the keys of scores
 * that are a dot product of two 4-D inputs q(d, i, h, b) . k(d, kv, hkv, b), modified and masked
 * elementwise, starting single-state sums of functions of the scores, one of them times a third input
 * v(e, kv, hkv, b), and outputs (the epilogue) of those states. Else why not, in words a user can act
 * on, naming the stage or Func at fault. */
std::string attention_mismatch(const FusedPlan &plan, const std::vector<Halide::Func> &outputs,
                               const LowerOptions &opt);
/** Whether the plan is attention's and reads K and V through a page table (its kernels then take
 * page_size, pages and max_pages, and a KV tile must lie in one page). */
bool reads_paged_cache(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt);

}  // namespace neptune::internal

#endif
