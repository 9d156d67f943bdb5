#ifndef NEPTUNE_LOWER_OVERLAP_DOTS_H
#define NEPTUNE_LOWER_OVERLAP_DOTS_H
/** \file
 * Intra-warpgroup overlap of the tensor cores with the elementwise work of the rolling loop
 * (FlashAttention-3's two-stage pipelining), by rotating the loop so that asynchronous wgmma dots
 * of neighbouring KV tiles run while the softmax of the current tile executes. */
#include "tir/IR.h"

namespace neptune::internal {

/** For a warp-specialized kernel whose KV loop body has the shape
 *   A: k = load K_j; s = dot(q, k^T); release k
 *   B: maps and reductions of s, the repair of acc, p = convert(s)
 *   C: v = load V_j; acc += dot(p, v); release v
 *   D: the rest (more reductions of s, state updates; not reading acc)
 * splits B into B1 (touching neither acc nor p) and B2 (the rest), and rewrites the loop over
 * [b, e) into three:
 *   for j in [b, min(b + 1, e)):  A; B; D
 *   for j in [b + 1, e):          A (s async); C for j - 1 (async); wait_dots(1); release k;
 *                                 B1; wait_dots(0); release v; B2; D
 *   for j in [max(b, e - 1), e):  C
 * so the score dot of tile j and the PV dot of tile j - 1 are in flight while B1 (masks, the row
 * max, the exponentials) runs. Afterwards the verifier's rule holds: nothing touches an in-flight
 * dot's accumulator or writes its operands. With `level` 2 and two or more compute warpgroups, they
 * also take turns issuing their dots (warpgroup_turn take before the score dot, pass after the PV
 * dot; begin and end around the loop), so one warpgroup's softmax runs while the tensor cores
 * serve the other's dots instead of all warpgroups computing softmax at once. Level 0 returns k.
 * Kernels of another shape are returned as they are.
 * Requires: specialize_warps (ring positions on the TMA loads and releases). */
tir::Kernel overlap_dots(const tir::Kernel &k, int level);

}  // namespace neptune::internal

#endif
