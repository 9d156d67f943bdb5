#ifndef NEPTUNE_FRONTEND_FUSED_PLAN_H
#define NEPTUNE_FRONTEND_FUSED_PLAN_H
/** \file
 * The fused reduction group, as the frontend hands it to the CPU form and to
 * the tile lowering: the stages of the chain in dependence order, each with
 * its reducer, its map over the shared reduction variable with the values of
 * the producers it reads as symbols, and its derived repair; plus the variant
 * (rolling or split-K) and the tile parameters.
 *
 * build_fused_plan() is the one place where directives are validated: every
 * user mistake is a CompileError raised there, naming the Funcs and the rule. */
#include <map>
#include <string>
#include <vector>

#include "Halide.h"
#include "frontend/DeriveRepair.h"

namespace neptune::internal {

enum class Variant { Rolling, SplitK };

/** One reduction of the chain: t(args) = init; t(args) = reducer(t(args), map) over the shared RVar. */
struct FusedStage {
    Halide::Func func;
    std::string name;
    Reducer reducer = Reducer::Sum;
    std::vector<std::string> args;  // pure variables, innermost first
    Halide::Expr init;  // the pure definition
    Halide::Expr map;  // g; producer values appear as float Variables named after the producer
    std::map<std::string, std::vector<Halide::Expr>> producer_args;  // where this stage reads each producer
    std::vector<std::string> producers;  // in chain order
    Repair repair;
    sym::Sign sign = sym::Sign::Unknown;  // known sign of the stage's values (for later repairs' proofs)
    bool is_target = false;  // named as a target by the directive
};

struct FusedPlan {
    std::string directive;  // e.g. "fuse_reduction(acc, {row_max}, kv)", for messages
    std::vector<FusedStage> stages;  // dependence order: producers before the stages that read them
    std::string rvar;
    Halide::Expr rmin, rextent;
    Variant variant = Variant::Rolling;
    int tile = 64;
    int chunks = 1;  // split-K only
    const FusedStage &stage(const std::string &name) const;
    /** A readable account: each stage, its reducer, map, repair and proof. */
    std::string describe() const;
};

/** `state`, stage `s`'s value accumulated under its producers' old values, re-expressed under their
 * new ones with the derived single-state repair (new = shift + coeff * old); `values` gives each
 * producer symbol p (old) and its primed p' (new). The reducer's identity stays as it is: an empty
 * state needs no repair, and evaluating one could give exp(-inf - -inf) = NaN. */
Halide::Expr repair_state(const FusedStage &s, const Halide::Expr &state,
                          const std::map<std::string, Halide::Expr> &values);

/** What a directive asked for, before validation. */
struct FusionRequest {
    std::vector<Halide::Func> targets;
    std::vector<Halide::Func> producers;  // empty: discover them from the targets
    bool discover = false;
    std::string rvar;
    Variant variant = Variant::Rolling;
    int tile = 64;
    int chunks = 1;
};

/** The buffer a Func only wraps (f(x, y) = buffer(x, y), as ImageParams and generator inputs appear
 * when used as Funcs), or null: the lowering and the extern stages read such a Func as its buffer. */
const Halide::Internal::Call *wrapped_buffer(const Halide::Internal::Function &f);

/** Validates the request, finds the chain, derives every repair. Throws CompileError. */
FusedPlan build_fused_plan(const FusionRequest &request);

}  // namespace neptune::internal

#endif
