#ifndef NEPTUNE_CHECK_ROWS_H
#define NEPTUNE_CHECK_ROWS_H
/** \file
 * Which rows of an operator's outputs to check against the fp64 reference when the whole would cost
 * too much, and the comparison over those rows. Halide-free (in neptune_core), so programs that link
 * only AOT libraries check their outputs the way the CPU checks do. */
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "neptune/HostTensor.h"

namespace neptune {

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

/** Each output of `actual` against `expected` over the rows of `runs`. */
std::vector<OutputCheck> compare_rows(const OperatorInstance &inst, const std::vector<RowRun> &runs,
                                      const std::vector<HostTensor> &actual, const std::vector<HostTensor> &expected);

/** Per output, the relative RMS error of `expected` itself rounded to the output's type, over the rows
 * of `runs`. No check's bound may be tighter than a small multiple of it: f16 values near 1e-5 are
 * subnormal, and rounding them alone exceeds the usual f16 bound. */
std::vector<double> rounding_rel_rms(const OperatorInstance &inst, const std::vector<RowRun> &runs,
                                     const std::vector<HostTensor> &expected);

}  // namespace neptune

#endif
