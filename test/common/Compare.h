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

}  // namespace neptune::testing

#endif
