#ifndef NEPTUNE_TEST_IN_ORDER_H
#define NEPTUNE_TEST_IN_ORDER_H
/** \file
 * A doctest check on listings (tile programs, emitted CUDA): pieces of text in a given order. */
#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace neptune::testing {

/** CHECKs (REQUIREs) that the `pieces` occur in `text` in this order. */
inline void check_in_order(const std::string &text, const std::vector<std::string> &pieces) {
    size_t at = 0;
    for (const std::string &p : pieces) {
        const size_t found = text.find(p, at);
        INFO("looking for `", p, "` after offset ", at, " in\n", text);
        REQUIRE(found != std::string::npos);
        at = found + p.size();
    }
}

}  // namespace neptune::testing

#endif
