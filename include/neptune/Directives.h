#ifndef NEPTUNE_DIRECTIVES_H
#define NEPTUNE_DIRECTIVES_H
/** \file
 * Neptune's scheduling directives on Halide Funcs: fuse a chain of reductions
 * that share a reduction variable although later ones need the final value
 * of earlier ones, and choose how the broken dependency is repaired.
 *
 * \code
 * // algorithm (plain Halide): row_max, then row_sum and acc read the final row_max
 * row_max(i) = -inf;  row_max(i) = max(row_max(i), s(kv, i));
 * row_sum(i) = 0;     row_sum(i) += exp(s(kv, i) - row_max(i));
 * acc(d, i) = 0;      acc(d, i) += exp(s(kv, i) - row_max(i)) * v(d, kv);
 * // schedule
 * neptune::fuse_reduction({acc, row_sum}, kv).rolling_update(64);     // FlashAttention
 * neptune::fuse_reduction({acc, row_sum}, kv).split_k_update(16, 64); // FlashDecoding
 * \endcode
 *
 * The rewrite, for a target t = (+)_kv g(r, c_kv) reading producers r:
 *   rolling:  r_k = F(r_(k-1), tile k);  t_k = h(t_(k-1), r_(k-1), r_k) (+) (+)_(tile k) g(r_k, c)
 *   split-K:  each chunk rolls on its own; then t = (+)_p h(t_p, r_p, r)
 * where the repair h is derived symbolically from g and proved (see describe()).
 *
 * Errors (neptune::CompileError, naming the Funcs and the rule), raised by the directive call:
 *  - a stage is not a reduction t = t + g, max(t, g) or min(t, g) with one update definition;
 *  - a stage reduces over another variable or domain than the given RVar;
 *  - a target reads a reduction over the RVar that the explicit producer list omits;
 *  - no repair exists for a target (the message names the blocking term);
 *  - a tile size or chunk count is zero or negative (a tile larger than the extent is fine). */
#include <memory>
#include <string>
#include <vector>

#include "Halide.h"

namespace neptune {

namespace internal {
struct FusedPlan;
struct FusionRequest;
}  // namespace internal

/** A fused reduction group: what fuse_reduction returns; the variant directives refine it. */
class FusedReduction {
public:
    /** The sequential variant: state carried across tiles of `tile` positions, repaired at every
     * tile; what follows the chain (division, log) runs once after the last tile. */
    FusedReduction &rolling_update(int tile);
    /** The parallel variant: `chunks` independent chunks (each rolling over tiles of `tile`
     * positions) produce partial states that a combine stage merges with the same repair. */
    FusedReduction &split_k_update(int chunks, int tile);
    /** The plan: each stage with its map, the derived repair h, its companions and proof. */
    std::string describe() const;
    /** The validated plan consumed by the CPU form and the tile lowering. */
    const internal::FusedPlan &plan() const;

    struct State;  // the request and its validated plan (defined in the implementation)
    explicit FusedReduction(std::shared_ptr<State> s);

private:
    std::shared_ptr<State> state_;
};

/** Fuses `targets` with the named producer reductions over `rvar`. */
FusedReduction fuse_reduction(const std::vector<Halide::Func> &targets, const std::vector<Halide::Func> &producers,
                              const Halide::RVar &rvar);
/** Fuses `targets` with every reduction over `rvar` they read, found by walking producers. */
FusedReduction fuse_reduction(const std::vector<Halide::Func> &targets, const Halide::RVar &rvar);
inline FusedReduction fuse_reduction(const Halide::Func &target, const std::vector<Halide::Func> &producers,
                                     const Halide::RVar &rvar) {
    return fuse_reduction(std::vector<Halide::Func>{target}, producers, rvar);
}
inline FusedReduction fuse_reduction(const Halide::Func &target, const Halide::RVar &rvar) {
    return fuse_reduction(std::vector<Halide::Func>{target}, rvar);
}

/** Rewrites every fused group that `outputs` depend on into its CPU form (plain Halide Funcs with
 * carried state, or partials plus a combine), changing the Funcs in place as schedules do, and
 * returns the Funcs to realize (outputs that are themselves fused stages become their fused value).
 * Compile the result with neptune::cpu_target(): the algebra relies on IEEE infinities. */
std::vector<Halide::Func> lower_to_cpu(const std::vector<Halide::Func> &outputs);

}  // namespace neptune

#endif
