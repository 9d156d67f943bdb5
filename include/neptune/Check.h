#ifndef NEPTUNE_CHECK_H
#define NEPTUNE_CHECK_H
/** \file
 * Checking an operator on the CPU: random inputs, the Halide algorithm
 * realized by Halide's JIT, and the fp64 reference, compared output by
 * output. Large shapes are checked on a sample of rows, chosen so the
 * reference stays within a work budget. */
#include <string>
#include <utility>
#include <vector>

#include "neptune/CheckRows.h"
#include "neptune/HostTensor.h"

namespace neptune {

struct CheckOptions {
    uint64_t seed = 20261129;
    InputStyle style = InputStyle::Normal;
    double work_budget = 2e9;  // reference flops to spend; every row is checked when the whole fits
};

struct CheckResult {
    std::vector<RowRun> runs;
    int64_t rows_checked = 0;
    std::vector<OutputCheck> outputs;
};

/** Runs the plain Halide algorithm of inst.spec on the CPU and compares it with the fp64 reference. */
CheckResult check_algorithm_on_cpu(const OperatorInstance &inst, const CheckOptions &options = {});

/** How a fused check schedules the operator (algorithms::fuse_operator). */
struct FusedVariant {
    bool split_k = false;
    int tile = 64;
    int chunks = 4;
    std::string name() const;  // "rolling, tile 64" or "split-K, 4 chunks, tile 64"
};

struct FusedCheckResult {
    std::vector<RowRun> runs;
    int64_t rows_checked = 0;
    std::string plan;  // the derived plans, as FusedReduction::describe() prints them
    std::vector<OutputCheck> vs_reference;  // fused, f32 outputs, against fp64
    std::vector<OutputCheck> unfused_vs_reference;  // unfused, f32 outputs, against fp64
    std::vector<OutputCheck> vs_unfused;  // fused against the unfused algorithm, both in f32
};

/** The operator fused by its Neptune schedule and lowered to the CPU form, against the unfused
 * algorithm and the fp64 reference, all outputs in f32 so the comparison sees fp32 rounding. */
FusedCheckResult check_fused_on_cpu(const OperatorInstance &inst, const FusedVariant &variant,
                                    const CheckOptions &options = {});

/** The bound of the fused-vs-unfused comparison: relative RMS error within fp32 rounding. */
constexpr double fused_rel_rms_bound = 1e-5;

}  // namespace neptune

#endif
