#include "Compare.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

namespace neptune::testing {

void check_close(const std::string &what, const HostTensor &actual, const HostTensor &expected, int64_t begin,
                 int64_t end) {
    check_close(what, actual, expected, tolerance_for(expected.desc.dtype), begin, end);
}

void check_close(const std::string &what, const HostTensor &actual, const HostTensor &expected, const Tolerance &tol,
                 int64_t begin, int64_t end) {
    const ErrorStats e = compare(actual.values, expected.values, begin, end);
    INFO(what << " (" << expected.desc.name << ", " << dtype_name(expected.desc.dtype)
              << "): " << e.describe(expected.desc) << "; tolerance rel rms " << tol.rel_rms << ", scaled max "
              << tol.max_scaled);
    CHECK(tol.accepts(e));
}

Tolerance with_rounding(const HostTensor &expected, Tolerance tol) {
    tol.rel_rms = std::max(tol.rel_rms, 2 * rounding_error(expected).rel_rms());
    return tol;
}

}  // namespace neptune::testing
