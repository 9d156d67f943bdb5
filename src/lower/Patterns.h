#ifndef NEPTUNE_LOWER_PATTERNS_H
#define NEPTUNE_LOWER_PATTERNS_H
/** \file
 * The patterns of the tile lowering: each recognises one kernel shape in a fused plan (and says why
 * not, in words a user can act on) and builds its tile program; the passes after the builder are
 * shared. Attention (Q·Kᵀ, row statistics, P·V), matmul-fed chains (row reductions of a matrix
 * product that is never stored: linear + cross-entropy) and row chains (reductions over one axis of
 * one input: softmax, log-sum-exp, cross-entropy, LayerNorm, RMSNorm) are the patterns, tried in
 * that order. See docs/design/lowering.md, "Patterns". */
#include <string>
#include <vector>

#include "lower/Lower.h"

namespace neptune::internal {

enum class PatternKind { Attention, MatmulChain, RowChain };
const char *pattern_name(PatternKind k);  // "attention", "matmul-fed chain", "row chain"

/** Which pattern lowers a plan, or why none does. */
struct PatternMatch {
    bool matched = false;
    PatternKind kind = PatternKind::Attention;  // when matched
    std::vector<std::string> reasons;  // when not: "<pattern>: <why>", one per pattern, in order
    explicit operator bool() const { return matched; }
    /** The reasons as one sentence for a CompileError: "no pattern of the tile backend matches: ...". */
    std::string why() const;
};

/** A Func's name as the user wrote it (Halide's unique suffix "$n" dropped): the builders' readable
 * value and tensor names. */
std::string base_name(const std::string &n);

/** Matches the plan (and its outputs, the pure Funcs after the chain) against every pattern. */
PatternMatch match_pattern(const FusedPlan &plan, const std::vector<Halide::Func> &outputs,
                           const LowerOptions &opt = LowerOptions());

/** The matched pattern's tile program, straight from its builder; CompileError with every pattern's
 * reason when none matches. */
tir::Program build_pattern(const FusedPlan &plan, const std::vector<Halide::Func> &outputs, const LowerOptions &opt);

}  // namespace neptune::internal

#endif
