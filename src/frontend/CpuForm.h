#ifndef NEPTUNE_FRONTEND_CPU_FORM_H
#define NEPTUNE_FRONTEND_CPU_FORM_H
/** \file
 * The CPU form of a fused group: the chain rewritten as plain Halide Funcs
 * that Halide compiles for the host. It is a real backend of the algebra, not
 * a test device: it computes exactly what the GPU kernels compute, tile by tile.
 *
 * Rolling (docs/design/fusion.md, rolling update), for each stage in chain order, tiles k = 0..K-1 of T positions:
 *   <s>_tile(args, k)  = reducer over the tile's positions of the map under the producers' values
 *                        after tile k (the last tile masked at the extent)
 *   <s>_state(args, 0) = <s>_tile(args, 0)                                   (first tile peeled)
 *   <s>_state(args, k) = reducer(h(<s>_state(args, k - 1), r_(k-1), r_k), <s>_tile(args, k))
 *   <s>_fused(args)    = reducer(init, <s>_state(args, K - 1))
 * Split-K (docs/design/fusion.md, split-K update): the same scan inside each of P chunks, then
 *   <s>_combined(args) = reducer over chunks p of h(<s>_state(args, last, p), r^(p), r).
 * A stage's state is a Tuple when its repair carries companions. Producer values fed to maps and
 * repairs are guarded: a max (min) producer that is still -inf (+inf) reads as 0 (docs/design/fusion.md, numerical
 * stability), which the exactness of h allows and which keeps fully masked tiles from making NaN.
 *
 * Every Func outside the chain that reads a chain stage is changed to read <s>_fused instead, so
 * consumers of producers' final values (an LSE output, attention weights) see exact values. */
#include <vector>

#include "Halide.h"
#include "frontend/FusedPlan.h"

namespace neptune::internal {

/** Applies the CPU form of `plan` to the pipeline of `outputs` (changing its Funcs in place, as
 * schedules do) and returns the Funcs to realize: `outputs`, with chain stages among them
 * replaced by their fused values. */
std::vector<Halide::Func> apply_cpu_form(const FusedPlan &plan, const std::vector<Halide::Func> &outputs);

}  // namespace neptune::internal

#endif
