#include "core/SplitChunks.h"

#include <algorithm>
#include <cmath>

namespace neptune::internal {

int decode_stages(int64_t blocks, int sms) { return blocks >= int64_t(sms) ? 2 : 3; }

bool decode_interleave_chunks(int64_t chunks) { return chunks <= 4; }

bool is_split_k_launch_param(const std::string &param) {
    return param == "chunks" || param == "interleave" || param == "chunk_tiles";
}

void set_split_k_params(std::map<std::string, int64_t> &ints, int64_t chunks, int64_t chunk_tiles) {
    ints["chunks"] = chunks;
    ints["interleave"] = decode_interleave_chunks(chunks);
    ints["chunk_tiles"] = chunk_tiles;
}

int decode_block_n(int64_t blocks, int sms, int head_dim) {
    return blocks * 16 <= int64_t(sms) && head_dim <= 128 ? 64 : 32;
}

int split_k_chunks(int64_t blocks, int64_t keys, int tile_keys, int sms, int resident) {
    blocks = std::max<int64_t>(blocks, 1);
    keys = std::max<int64_t>(keys, 0);
    tile_keys = std::max(tile_keys, 1);
    const int64_t tiles = (keys + tile_keys - 1) / tile_keys;
    const int64_t most = std::max<int64_t>(1, std::min<int64_t>(tiles, 64));
    const int64_t slots = int64_t(std::max(resident, 1)) * sms;
    if (blocks < 2 * int64_t(sms)) {
        const int64_t fill = (2 * int64_t(sms) + blocks - 1) / blocks;
        // The cap counts 32-key tiles whatever the kernel's tile: it was calibrated per key.
        const int64_t root = int64_t(std::ceil(std::sqrt(double(std::max<int64_t>(keys, 1)) / 32.0)));
        // Never past one wave: blocks of several warps may fit fewer than two per SM.
        const int64_t wave = std::max<int64_t>(1, slots / blocks);
        const int64_t c0 = std::max<int64_t>(1, std::min({fill, root, most, wave}));
        // Up to a quarter fewer chunks where that evens out the SMs: in one wave the busiest SM holds
        // ceil(c * blocks / sms) blocks of ceil(tiles / c) tiles, and the kernel lasts as long as it.
        const auto busiest = [&](int64_t c) { return (c * blocks + sms - 1) / sms * ((tiles + c - 1) / c); };
        int64_t best = c0;
        for (int64_t c = c0 - 1; c >= std::max<int64_t>(1, (3 * c0 + 3) / 4); c--)
            if (busiest(c) < busiest(best)) best = c;
        return int(best);
    }
    // Whole waves: with c chunks the grid is c * blocks blocks in ceil(c * blocks / slots) waves; one
    // wave (however full) is as good as any, since every SM then streams from the start.
    int best = 1;
    double best_fill = 0;
    for (int c = 1; c <= std::min<int64_t>(4, most); c++) {
        const int64_t n = c * blocks, waves = (n + slots - 1) / slots;
        const double fill = waves == 1 ? 1.0 : double(n) / double(waves * slots);
        if (fill > best_fill + 1e-9) best = c, best_fill = fill;
    }
    return best;
}

int resident_blocks(int shared_bytes, int max_shared_per_block) {
    return std::max(1, (std::max(max_shared_per_block, 0) + 1024) / (std::max(shared_bytes, 0) + 1024));
}

bool use_cluster_merge(int choice, int64_t chunks, bool sm90a, int fold_combine, int warps) {
    if (choice >= 0) return choice == 1;
    return sm90a && fold_combine != 0 && warps == 1 && chunks >= 2 && chunks <= kMaxClusterChunks;
}

}  // namespace neptune::internal
