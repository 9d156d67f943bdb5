#ifndef NEPTUNE_CORE_PARALLEL_FOR_H
#define NEPTUNE_CORE_PARALLEL_FOR_H
/** \file
 * Host loops over the benchmark's tensors (a billion elements at batch 32) on every core. */
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace neptune::internal {

/** Calls body(begin, end) on disjoint ranges covering [0, n), in chunks of at least `grain`, on up to
 * hardware_concurrency threads; serially when n is small. `body` must not throw. */
template <typename Body>
void parallel_for(int64_t n, int64_t grain, const Body &body) {
    const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
    const int64_t threads = std::min<int64_t>(hw, std::max<int64_t>(1, n / std::max<int64_t>(grain, 1)));
    if (threads <= 1) {
        if (n > 0) body(int64_t(0), n);
        return;
    }
    std::vector<std::thread> pool;
    const int64_t step = (n + threads - 1) / threads;
    for (int64_t t = 0; t < threads; t++) {
        const int64_t b = t * step, e = std::min(n, b + step);
        if (b < e) pool.emplace_back([&body, b, e] { body(b, e); });
    }
    for (std::thread &t : pool) t.join();
}

}  // namespace neptune::internal

#endif
