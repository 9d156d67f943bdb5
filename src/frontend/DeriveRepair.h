#ifndef NEPTUNE_FRONTEND_DERIVE_REPAIR_H
#define NEPTUNE_FRONTEND_DERIVE_REPAIR_H
/** \file
 * The repair h of a fused reduction (docs/design/fusion.md, the repair function): given a target
 * t = (+)_j g(r, c_j) over a reducer (+), max or min, where r are the values of
 * the producer reductions it reads, find h(t, r, r') that re-expresses a
 * partial target accumulated under r as if under r'. h is derived
 * symbolically on Halide Exprs and both defining identities are proved by
 * rewriting to a normal form:
 *   (R1) h(g(r, c), r, r') = g(r', c) for every c,
 *   (R2) h distributes over the target's reducer.
 *
 * Four forms are derived:
 *   None     g does not read a producer: h(t) = t.
 *   Rescale  g = S(r) * U(c):  h(t) = t * S(r')/S(r). For max/min, S's sign must be
 *            provably definite, so the factor is positive and h is monotone (docs/design/fusion.md,
 *            max and min target reducers).
 *   Shift    (max/min only) g = P(r) + U(c):  h(t) = t - P(r) + P(r'), monotone.
 *   Taylor   (sums only) g = S(r) * p(r, c) with p polynomial in producer values: the state
 *            carries companions T_a = sum_j S(r) d^a p / a! (its derivatives in the producers),
 *            and T_b(r') = S(r')/S(r) * sum_c binom(b+c, c) (r' - r)^c T_(b+c)(r). The mean ->
 *            variance chain of LayerNorm gets Chan's update this way (docs/design/fusion.md,
 *            multi-moment states).
 * Stability (docs/design/fusion.md, numerical stability): a producer may enter an exponential of
 * the repair factor only as -max or +min (possibly behind a safe-max select), which keeps every
 * exponent <= 0 between partial values; other exponentials of producers could overflow where the
 * unfused algorithm does not, and are rejected. (With no reducers given, as in unit tests of the
 * algebra alone, this is not checked.) Selects whose conditions do not read producers (masks) are
 * lifted first: every branch that is not the reducer's identity must admit the same repair. */
#include <map>
#include <string>
#include <vector>

#include "Halide.h"
#include "frontend/Symbolic.h"

namespace neptune::internal {

enum class Reducer { Sum, Max, Min };
const char *reducer_name(Reducer r);
/** The identity of the reducer: 0, -inf or +inf. */
Halide::Expr reducer_identity(Reducer r);
/** reducer(a, b): a + b, max(a, b) or min(a, b). */
Halide::Expr reducer_combine(Reducer r, const Halide::Expr &a, const Halide::Expr &b);
/** A producer value as fused stages read it: a max (min) still at its identity, i.e. one that has
 * seen only masked positions, reads as 0 (docs/design/fusion.md, numerical stability); sums read as
 * they are. The repairs are exact for any producer values, so this only keeps -inf - (-inf) out of
 * exponents. */
Halide::Expr guarded_producer(Reducer r, const Halide::Expr &v);

enum class RepairKind { None, Rescale, Shift, Taylor };
const char *repair_kind_name(RepairKind k);

/** A derived repair. The carried state of the target is a vector of companions; companion 0 is
 * the target itself. Producer values appear as float Variables named after the producer stage
 * (the old value r) and with a prime (the new value r'), e.g. row_max and row_max'. */
struct Repair {
    RepairKind kind = RepairKind::None;
    std::vector<std::string> names;  // companion names: t, then t[d/d row_max], ...
    std::vector<Halide::Expr> maps;  // per-term map of each companion, in the old producer values
    std::vector<std::vector<Halide::Expr>> coeff;  // new_k = shift_k + sum_m coeff[k][m] * old_m (undefined = 0)
    std::vector<Halide::Expr> shift;  // undefined = 0
    std::vector<std::string> producers;  // the producer symbols the repair reads
    Halide::Expr h;  // new_0 written with Variables t (old_0) and the companion names
    std::string proof;  // how R1 and R2 were established
};

/** Derives the repair of `target` (for messages) whose update is t = reducer(t, map); `producers`
 * are the names of the producer Variables in `map`, `rvar` the reduction variable, `facts` the
 * known signs of producer values. Throws CompileError naming the blocking sub-expression. */
Repair derive_repair(const std::string &target, Reducer reducer, const Halide::Expr &map,
                     const std::vector<std::string> &producers, const std::string &rvar,
                     const std::map<std::string, sym::Sign> &facts,
                     const std::map<std::string, Reducer> &producer_reducers = {});

}  // namespace neptune::internal

#endif
