#include "core/SplitChunks.h"

#include <algorithm>

namespace neptune::internal {

int split_k_chunks(int64_t blocks, int64_t tiles, int sms) {
    if (blocks >= sms) return int(std::max<int64_t>(1, std::min<int64_t>(tiles, blocks >= 2 * sms ? 1 : 2)));
    const int64_t want = (2 * int64_t(sms) + blocks - 1) / std::max<int64_t>(blocks, 1);
    return int(std::max<int64_t>(1, std::min<int64_t>({want, tiles, 64})));
}

}  // namespace neptune::internal
