#ifndef NEPTUNE_TEST_COMMON_COMPARE_H
#define NEPTUNE_TEST_COMMON_COMPARE_H
/** \file
 * Test helpers: compare tensors with per-type tolerances and report the worst
 * element and its index on failure. */
#include <string>
#include <vector>

#include "neptune/HostTensor.h"

namespace neptune::testing {

/** CHECKs that `actual` matches `expected` within tolerance_for(dtype) over elements [begin, end);
 * on failure the message names `what`, the worst element's index and both values. */
void check_close(const std::string &what, const HostTensor &actual, const HostTensor &expected, int64_t begin = 0,
                 int64_t end = -1);
void check_close(const std::string &what, const HostTensor &actual, const HostTensor &expected, const Tolerance &tol,
                 int64_t begin = 0, int64_t end = -1);

/** `tol` with its relative RMS raised to twice the error of `expected` itself rounded to its type,
 * where that is larger: no kernel beats rounding the exact answer (softmax over 131072 columns
 * writes f16 values near 1e-5, subnormal, where rounding alone exceeds the f16 tolerance). */
Tolerance with_rounding(const HostTensor &expected, Tolerance tol);

}  // namespace neptune::testing

#endif
