#ifndef NEPTUNE_TEST_DEVICE_ATTENTION_FWD_CUH
#define NEPTUNE_TEST_DEVICE_ATTENTION_FWD_CUH
/** \file
 * A FlashAttention-2-style forward kernel written only with neptune::device calls, as the code
 * generator will emit one: Q in registers, K and V double-buffered through cp.async, online
 * softmax in base 2, O rescaled per KV tile and divided by the row sum after the loop. Device code
 * only, so the NVRTC test compiles it as well. */
#include "neptune/device/neptune_device.cuh"

namespace neptune::device_test {

namespace nd = neptune::device;

/** One CTA = 4 warps = 64 query rows (16 per warp); KV tiles of 64 keys; head dimension 128. */
struct attention_shape {
    static constexpr int threads = 128;
    static constexpr int block_m = 64;
    static constexpr int block_n = 64;
    static constexpr int head_dim = 128;
};

template <typename T>
using attention_tile = nd::smem_tile<T, 64, 128>;

/** Dynamic shared memory: two K stages and two V stages. Q borrows K's second stage: it moves to
 * registers before that stage is first written. */
template <typename T>
constexpr int attention_smem_bytes = 4 * attention_tile<T>::bytes;

/** o = softmax(scale q k^T) v for each (batch, head); q, k, v, o are [B * H][seq][128] contiguous.
 * Grid (ceil(seq / 64), B * H), 128 threads, attention_smem_bytes<T> of dynamic shared memory;
 * scale_log2 = scale * log2(e). With CAUSAL, query i sees keys 0 .. i.
 * Occupancy 3 (12 warps per SM on H100/H200) fits both shared memory (3 x 68 KB) and registers:
 * ptxas then keeps the kernel at 167 registers per thread, without spills. */
template <typename T, bool CAUSAL>
__global__ void __launch_bounds__(128, 3)
    attention_fwd(const T *q, const T *k, const T *v, T *o, int seq, float scale_log2) {
    constexpr int D = attention_shape::head_dim, BN = attention_shape::block_n, THREADS = attention_shape::threads;
    extern __shared__ __align__(16) unsigned char smem[];
    // Slots 0, 1: K stages; 2, 3: V stages. Computed, not an array of tiles: an array indexed by the
    // run-time stage would live in local memory.
    const auto slot = [&](int i) {
        return attention_tile<T>{reinterpret_cast<T *>(smem + i * attention_tile<T>::bytes)};
    };
    const attention_tile<T> q_s = slot(1);

    // Causal blocks with the most KV tiles go first, so the short ones fill the tail of the grid.
    const int q_block = CAUSAL ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
    const int q0 = q_block * attention_shape::block_m;
    const long long head = static_cast<long long>(blockIdx.y) * seq * D;
    const int kv_tiles_all = (seq + BN - 1) / BN;
    const int kv_tiles = CAUSAL && q_block + 1 < kv_tiles_all ? q_block + 1 : kv_tiles_all;  // block_m == block_n
    q += head;
    k += head;
    v += head;
    o += head;

    // cp.async groups, oldest first: {Q, K0}, {V0}, then per tile j: {K j+1}, {V j+1} (empty past the
    // end), so "wait until one group is in flight" always means "the tile needed next has landed".
    nd::load_tile_async<THREADS>(q_s, q + static_cast<long long>(q0) * D, D, seq - q0, D);
    nd::load_tile_async<THREADS>(slot(0), k, D, seq, D);
    nd::cp_async_commit();
    nd::load_tile_async<THREADS>(slot(2), v, D, seq, D);
    nd::cp_async_commit();

    const int warp = nd::warp_id();
    const int row0 = q0 + 16 * warp;  // this warp's first query row
    nd::a_tile<T, 1, D / 16> q_frag;
    nd::acc_tile<1, D / 8> acc;
    nd::row_vec<1> m, l;
    nd::fill(acc, 0.0f);
    nd::fill(m, nd::neg_inf());
    nd::fill(l, 0.0f);

    for (int j = 0; j < kv_tiles; ++j) {
        const int kv0 = j * BN, stage = j & 1;
        const long long next = static_cast<long long>(kv0 + BN) * D;
        nd::cp_async_wait<1>();  // K j (and Q) have landed
        nd::barrier();  // ... for every thread's copies; and stage ^ 1 is no longer read
        if (j == 0) {
            nd::load_a(q_frag, q_s, 16 * warp);
            nd::barrier();  // Q is in every warp's registers before K 1 overwrites it
        }
        if (j + 1 < kv_tiles) nd::load_tile_async<THREADS>(slot(stage ^ 1), k + next, D, seq - kv0 - BN, D);
        nd::cp_async_commit();

        nd::acc_tile<1, BN / 8> s;
        nd::fill(s, 0.0f);
        nd::mma_abt(s, q_frag, slot(stage), 0);
        // Keys past the end (zero-filled, so their scores are 0, not absent) and, when causal, keys
        // after the query get -inf; only the last tile and the diagonal tile need it.
        if (kv0 + BN > seq || (CAUSAL && kv0 + BN > q0)) {
            nd::map(s, [&](float x, int r, int c) {
                const int key = kv0 + c;
                return key >= seq || (CAUSAL && key > row0 + r) ? nd::neg_inf() : x;
            });
        }

        // Online softmax in base 2 on unscaled scores: p = 2^(s * scale_log2 - m * scale_log2), one
        // FFMA and one ex2 per score. A row that has seen only masked keys keeps m = -inf; the guards
        // give it p = 0 and alpha = 1 instead of NaN.
        nd::row_vec<1> m_new = m;
        nd::row_max(m_new, s);
        nd::row_vec<1> alpha = m;
        nd::map_vec(alpha, m_new, [=](float mo, float mn) {
            return mn == nd::neg_inf() ? 1.0f : nd::fast_exp2((mo - mn) * scale_log2);
        });
        nd::row_vec<1> bias = m_new;
        nd::map_vec(bias, [=](float mn, int) { return mn == nd::neg_inf() ? 0.0f : mn * scale_log2; });
        nd::map_rows(s, bias, [=](float x, float b) { return nd::fast_exp2(x * scale_log2 - b); });
        nd::map_rows(acc, alpha, [](float x, float a) { return x * a; });
        nd::map_vec(l, alpha, [](float x, float a) { return x * a; });
        nd::row_sum(l, s);
        m = m_new;
        nd::a_tile<T, 1, BN / 16> p;
        nd::acc_to_a(p, s);

        nd::cp_async_wait<1>();  // V j has landed
        nd::barrier();
        if (j + 1 < kv_tiles) nd::load_tile_async<THREADS>(slot(2 + (stage ^ 1)), v + next, D, seq - kv0 - BN, D);
        nd::cp_async_commit();
        nd::mma_ab(acc, p, slot(2 + stage), 0, 0);
    }

    nd::map_rows(acc, l, [](float x, float sum) { return sum > 0.0f ? x / sum : 0.0f; });
    nd::store_acc(o, D, acc, row0, seq, D);
}

}  // namespace neptune::device_test

#endif
