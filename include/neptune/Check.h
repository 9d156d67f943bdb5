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

#include "neptune/HostTensor.h"

namespace neptune {

struct CheckOptions {
    uint64_t seed = 20261129;
    InputStyle style = InputStyle::Normal;
    double work_budget = 2e9;  // reference flops to spend; every row is checked when the whole fits
};

/** A contiguous run of rows [first, first + count), inside one row block. */
using RowRun = std::pair<int64_t, int64_t>;

/** Every row (one run per row block) if the reference of all rows fits in `work_budget` flops,
 * else runs spread over evenly spaced row blocks (first and last included), at their start,
 * a third, two thirds and end. */
std::vector<RowRun> choose_rows(const OperatorInstance &inst, double work_budget);

struct OutputCheck {
    std::string output;
    ErrorStats error;  // against the fp64 reference
};

struct CheckResult {
    std::vector<RowRun> runs;
    int64_t rows_checked = 0;
    std::vector<OutputCheck> outputs;
};

/** Runs the plain Halide algorithm of inst.spec on the CPU and compares it with the fp64 reference. */
CheckResult check_algorithm_on_cpu(const OperatorInstance &inst, const CheckOptions &options = {});

}  // namespace neptune

#endif
