// Split-K decode with work stealing across (batch, KV head) groups, written by hand to measure it
// before the compiler derives it. Drop-in for the emitted `neptune_split_k` (same signature) through
// NEPTUNE_CUDA_OVERRIDE=<folder holding this file as neptune_split_k.cu>; head dim 128, 32-key tiles,
// a 2-stage TMA ring (the kernel's shared memory may be planned for more stages; it uses two).
//
// Why: a one-wave memory-bound launch lasts as long as its slowest blocks, and the blocks of
// decode_causal 8,8192 end their streams up to ~8 us apart, block against block and SM against SM
// (per-block timelines: docs/engineering-log.md, 2026-12-03). Claims inside a group balance only a
// group's blocks, which run alike.
// Here a block that has finished its own group's tiles steals tiles of the group with the most left,
// keeps a separate softmax state for them and writes it as an extra partial of that group.
//
// Per group, a 128-byte line: the tiles claimed after the fixed first ones (block c of the group
// starts with tile c; every later tile is `chunks + claim`) and the steal slots taken. Own blocks
// claim with atomicAdd, one claim ahead of use; a thief takes a slot, then a tile, so it never holds
// a tile without a slot. A group's arrival count adds 65536 per
// own block plus the tiles of every partial; it completes at chunks * 65536 + visible tiles, so the
// last arrival has every tile's state and merges the own partials with the flagged steal slots.
// The launch's last block to exit resets the claim words for the next launch.
#include "neptune/device/neptune_device.cuh"

namespace nd = neptune::device;

#define ST_MAXS 8  // steal slots per group
#define ST_MAXG 1024  // groups (batch x KV heads) stealing supports; more: no stealing
// Switches for measuring: ST_NOCLAIM (own tiles dealt round-robin, no atomics, no stealing),
// ST_STATS (steal counts per launch), ST_PROBE (per-block %globaltimer stamps of the 7th launch,
// printed as probe_timeline.py's PROBE lines: start, own stream end twice, exit).
#ifndef ST_MIN
#define ST_MIN 3  // unclaimed tiles a victim must have left to be worth a segment
#endif

__device__ unsigned
    st_word[ST_MAXG * 32];  // [32 g]: tiles claimed, [32 g + 1]: steal slots taken (a 128-byte line each)
__device__ unsigned st_arrive[ST_MAXG * 32];  // [32 g]: arrivals; [32 g + 4 + s]: tiles in slot s
__device__ unsigned st_exit;
#ifdef ST_PROBE
__device__ unsigned long long st_stamp[4096 * 4];
__device__ unsigned st_launch;
NEPTUNE_DEVICE_INLINE unsigned long long st_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif
#ifdef ST_STATS
__device__ unsigned st_segments, st_tiles_stolen;  // this launch's steal segments and their tiles
#endif
__device__ float st_m[ST_MAXG * ST_MAXS * 16];
__device__ float st_l[ST_MAXG * ST_MAXS * 16];
__device__ float st_acc[ST_MAXG * ST_MAXS * 16 * 128];

extern "C" __global__ void __launch_bounds__(32)
    neptune_split_k(const nd::f16 *__restrict__ q, const nd::f16 *__restrict__ k, const nd::f16 *__restrict__ v,
                    float *__restrict__ ws_row_max, float *__restrict__ ws_acc, float *__restrict__ ws_row_sum,
                    nd::f16 *__restrict__ out, float *__restrict__ ws_arrivals,
                    const __grid_constant__ nd::tensor_map k_map, const __grid_constant__ nd::tensor_map v_map,
                    int batch, int q_heads, int kv_heads, int seq_q, int seq_kv, int chunks, int interleave) {
    (void)ws_arrivals;
    (void)interleave;
    (void)k;
    (void)v;
    constexpr int THREADS = 32;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *const smem = smem_raw + ((1024u - (nd::smem_address(smem_raw) & 1023u)) & 1023u);
    const int warp = 0;
    const int lane = threadIdx.x;
    const int G = batch * kv_heads;
    const int group = nd::div_euclid(q_heads, kv_heads);
    const int n_tiles = nd::div_euclid(((seq_kv + 32) - 1), 32);
    const int j_end = min((nd::div_euclid(min((seq_kv - seq_q), (seq_kv + -1)), 32) + 1), n_tiles);
    const int n_rows = batch * q_heads;
    const bool stealing = G <= ST_MAXG;
    const auto k_s_buf = [&](int stage) {
        return nd::swizzled_tile<nd::f16, 32, 128>{reinterpret_cast<nd::f16 *>(smem + 0 + stage * 8192)};
    };
    const auto q_s_buf = [&](int stage) {
        return nd::swizzled_tile<nd::f16, 16, 128>{reinterpret_cast<nd::f16 *>(smem + 8192 + stage * 4096)};
    };
    const auto v_s_buf = [&](int stage) {
        return nd::swizzled_tile<nd::f16, 32, 128>{reinterpret_cast<nd::f16 *>(smem + 16384 + stage * 8192)};
    };
    unsigned long long *const k_s_full = reinterpret_cast<unsigned long long *>(smem + 32768);
    unsigned long long *const v_s_full = reinterpret_cast<unsigned long long *>(smem + 32784);
    __shared__ int slot_tile[2];
    __shared__ unsigned sh_last;
    if (threadIdx.x == 0) {
        nd::mbarrier_init(k_s_full + 0, 1);
        nd::mbarrier_init(k_s_full + 1, 1);
        nd::mbarrier_init(v_s_full + 0, 1);
        nd::mbarrier_init(v_s_full + 1, 1);
        nd::fence_barrier_init();
        nd::tma_prefetch(k_map);
        nd::tma_prefetch(v_map);
    }
    __syncthreads();
    nd::acc_tile<1, 16> acc;
    nd::a_tile<nd::f16, 1, 8> q_a;
    nd::row_vec<1> row_max, row_max_new, row_sum, row_sum_new, s_max_raw, s_r0, acc_scale;
    nd::acc_tile<1, 4> s;
    nd::a_tile<nd::f16, 1, 2> s_a;
#ifdef ST_PROBE
    const int blk = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (threadIdx.x == 0 && blk < 4096) {
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        st_stamp[4 * blk] = st_now();
        st_stamp[4 * blk + 3] = sm;
    }
#endif
    unsigned phase_bits = 0;  // bit st: the parity the next wait on stage st expects

    int vg = blockIdx.z * kv_heads + blockIdx.y;  // the segment's group: own first, then victims
    int slot = blockIdx.x;  // own: the chunk; stolen: the steal slot
    int first = blockIdx.x;  // the segment's first tile (fixed or taken with the slot)
    bool own = true;
    while (vg >= 0) {
        const int b = vg / kv_heads, hkv = vg % kv_heads, h0 = hkv * group, r0 = b * q_heads + h0;
        unsigned *const word = st_word + 32 * vg;
        unsigned *const arrive = st_arrive + 32 * vg;
        const int row_ref = (b * kv_heads) + hkv;
        // The segment's first copies, then Q: the ring is drained, and Q lives in stage 1's K buffer.
        nd::barrier();
        unsigned pending = 0;
        bool have_pending = false;
        if (threadIdx.x == 0) {
            slot_tile[0] = first < j_end ? first : j_end;
            if (first < j_end) {
                nd::fence_proxy_async();
                nd::mbarrier_arrive_expect_tx(k_s_full + 0, 8192);
                nd::tma_load_tile(k_s_buf(0), k_map, first * 32, row_ref, k_s_full + 0);
                nd::mbarrier_arrive_expect_tx(v_s_full + 0, 8192);
                nd::tma_load_tile(v_s_buf(0), v_map, first * 32, row_ref, v_s_full + 0);
#ifndef ST_NOCLAIM
                pending = atomicAdd(word, 1u);  // the next tile's claim, read an iteration later
#endif
                have_pending = true;
            }
        }
        nd::load_tile_sync<THREADS>(q_s_buf(0), (q + (long long)(r0 * seq_q * 128)), (seq_q * 128), max(0, group), 128);
        nd::barrier();
        nd::load_a(q_a, q_s_buf(0), 0);
        nd::fill(row_max, nd::neg_inf());
        nd::fill(acc, 0.0f);
        nd::fill(row_sum, 0.0f);
        nd::barrier();  // Q's shared reads done before stage 1's first copy lands there
        int n_done = 0;
        for (int t = 0;; ++t) {
            const int st = t & 1;
            __syncwarp();
            const int cur = slot_tile[st];
            if (cur >= j_end) break;
            const unsigned ph = (phase_bits >> st) & 1u;
            nd::mbarrier_wait(k_s_full + st, ph);
            nd::barrier();
            if (threadIdx.x == 0) {
#ifdef ST_NOCLAIM
                int nxt = cur + chunks;
#else
                int nxt = have_pending ? chunks + int(pending) : j_end;
#endif
                if (nxt > j_end) nxt = j_end;
                slot_tile[st ^ 1] = nxt;
                if (nxt < j_end) {
#ifndef ST_NOCLAIM
                    pending = atomicAdd(word, 1u);
#endif
                    nd::fence_proxy_async();
                    nd::mbarrier_arrive_expect_tx(k_s_full + (st ^ 1), 8192);
                    nd::tma_load_tile(k_s_buf(st ^ 1), k_map, nxt * 32, row_ref, k_s_full + (st ^ 1));
                } else {
                    have_pending = false;
                }
            }
            nd::fill(s, 0.0f);
            nd::mma_abt(s, q_a, k_s_buf(st), 0);
            if (!((((cur * 32) + seq_q) + 31) <= seq_kv && (cur * 32) < (seq_kv + -31))) {
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int col = nd::frag_col(nt, e);
                        s.v[0][nt][e] = ((cur * 32 + col) <= (seq_kv - seq_q) && (cur * 32 + col) < seq_kv)
                                            ? s.v[0][nt][e]
                                            : nd::neg_inf();
                    }
            }
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) row_max_new.v[0][hh] = row_max.v[0][hh];
            nd::fill(s_max_raw, nd::neg_inf());
            nd::row_max(s_max_raw, s);
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                row_max_new.v[0][hh] = fmaxf(row_max_new.v[0][hh], (s_max_raw.v[0][hh] * 0.0883883461f));
                s_r0.v[0][hh] = (((row_max_new.v[0][hh] == nd::neg_inf()) ? 0.0f : row_max_new.v[0][hh]) * 1.44269502f);
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    s.v[0][nt][e] = nd::fast_exp2(((s.v[0][nt][e] * 0.127517432f) - s_r0.v[0][e >> 1]));
#pragma unroll
            for (int hh = 0; hh < 2; ++hh)
                acc_scale.v[0][hh] =
                    fminf(nd::fast_exp2(((((row_max.v[0][hh] == nd::neg_inf()) ? 0.0f : row_max.v[0][hh]) -
                                          ((row_max_new.v[0][hh] == nd::neg_inf()) ? 0.0f : row_max_new.v[0][hh]))) *
                                        1.44269504f),
                          3.39999995e+38f);
#pragma unroll
            for (int nt = 0; nt < 16; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc.v[0][nt][e] = (acc.v[0][nt][e] * acc_scale.v[0][e >> 1]);
            nd::acc_to_a(s_a, s);
            nd::mbarrier_wait(v_s_full + st, ph);
            nd::barrier();
            if (threadIdx.x == 0 && slot_tile[st ^ 1] < j_end) {
                nd::fence_proxy_async();
                nd::mbarrier_arrive_expect_tx(v_s_full + (st ^ 1), 8192);
                nd::tma_load_tile(v_s_buf(st ^ 1), v_map, slot_tile[st ^ 1] * 32, row_ref, v_s_full + (st ^ 1));
            }
            nd::mma_ab(acc, s_a, v_s_buf(st), 0, 0);
#pragma unroll
            for (int hh = 0; hh < 2; ++hh)
                row_sum_new.v[0][hh] =
                    ((row_sum.v[0][hh] == 0.0f) ? row_sum.v[0][hh] : (row_sum.v[0][hh] * acc_scale.v[0][hh]));
            nd::row_sum(row_sum_new, s);
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                row_max.v[0][hh] = row_max_new.v[0][hh];
                row_sum.v[0][hh] = row_sum_new.v[0][hh];
            }
            phase_bits ^= 1u << st;
            ++n_done;
        }
#ifdef ST_PROBE
        if (threadIdx.x == 0 && own && blk < 4096) st_stamp[4 * blk + 1] = st_now();
#endif
#ifdef ST_STATS
        if (threadIdx.x == 0 && !own && n_done > 0) {
            atomicAdd(&st_segments, 1u);
            atomicAdd(&st_tiles_stolen, unsigned(n_done));
        }
#endif
        // The segment's partial, then its arrival.
        const bool write = own || n_done > 0;
        if (own) {
            const long long base = (long long)slot * n_rows + r0;
            nd::store_rows(ws_row_max + base, row_max, 16 * warp, group);
            nd::store_acc_f32(ws_acc + base * 128, 128, acc, 16 * warp, group, 128);
            nd::store_rows(ws_row_sum + base, row_sum, 16 * warp, group);
        } else if (n_done > 0) {
            const long long base = ((long long)vg * ST_MAXS + slot) * 16;
            nd::store_rows(st_m + base, row_max, 16 * warp, group);
            nd::store_acc_f32(st_acc + base * 128, 128, acc, 16 * warp, group, 128);
            nd::store_rows(st_l + base, row_sum, 16 * warp, group);
            if (threadIdx.x == 0) arrive[4 + slot] = unsigned(n_done);
        }
        if (write) {
            __syncthreads();
            if (threadIdx.x == 0) {
                const unsigned add = (own ? 65536u : 0u) + unsigned(n_done);
                unsigned before;
                asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n"
                             : "=r"(before)
                             : "l"(arrive), "r"(add)
                             : "memory");
                sh_last = before + add == 65536u * unsigned(chunks) + unsigned(j_end);
                if (sh_last) asm volatile("st.relaxed.gpu.global.u32 [%0], 0;\n" ::"l"(arrive) : "memory");
            }
            __syncthreads();
            if (sh_last) {
                // The group's last arrival merges the own chunks and the flagged steal slots.
                unsigned flag = 0;
                if (lane < ST_MAXS) {
                    flag = *reinterpret_cast<volatile unsigned *>(arrive + 4 + lane);
                    if (flag) arrive[4 + lane] = 0;
                }
                const unsigned stolen = __ballot_sync(0xffffffffu, flag != 0);
                for (int row = 0; row < group; ++row) {
                    float m = nd::neg_inf(), l = 0.0f;
                    float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
                    const auto merge = [&](float mp, float lp, float4 ap) {
                        if (lp == 0.0f) return;
                        const float mn = fmaxf(m, mp);
                        const float sa = m == nd::neg_inf() ? 0.0f : __expf(m - mn), sp = __expf(mp - mn);
                        a.x = a.x * sa + ap.x * sp;
                        a.y = a.y * sa + ap.y * sp;
                        a.z = a.z * sa + ap.z * sp;
                        a.w = a.w * sa + ap.w * sp;
                        l = l * sa + lp * sp;
                        m = mn;
                    };
                    // four partials' loads in flight at a time
                    for (int p0 = 0; p0 < chunks; p0 += 4) {
                        float mp[4], lp[4];
                        float4 ap[4];
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const long long j = (long long)(p0 + i) * n_rows + r0 + row;
                            const bool ok = p0 + i < chunks;
                            mp[i] = ok ? ws_row_max[j] : nd::neg_inf();
                            lp[i] = ok ? ws_row_sum[j] : 0.0f;
                            ap[i] = ok ? *reinterpret_cast<const float4 *>(ws_acc + j * 128 + 4 * lane)
                                       : make_float4(0.f, 0.f, 0.f, 0.f);
                        }
#pragma unroll
                        for (int i = 0; i < 4; ++i) merge(mp[i], lp[i], ap[i]);
                    }
                    for (unsigned bits = stolen; bits;) {
                        float mp[4], lp[4];
                        float4 ap[4];
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const bool ok = bits != 0;
                            const long long j = ((long long)vg * ST_MAXS + (ok ? __ffs(bits) - 1 : 0)) * 16 + row;
                            bits &= bits - 1;
                            mp[i] = ok ? st_m[j] : nd::neg_inf();
                            lp[i] = ok ? st_l[j] : 0.0f;
                            ap[i] = ok ? *reinterpret_cast<const float4 *>(st_acc + j * 128 + 4 * lane)
                                       : make_float4(0.f, 0.f, 0.f, 0.f);
                        }
#pragma unroll
                        for (int i = 0; i < 4; ++i) merge(mp[i], lp[i], ap[i]);
                    }
                    const float inv = l == 0.0f ? 0.0f : 1.0f / l;
                    nd::f16 *o = out + (long long)(r0 + row) * 128 + 4 * lane;
                    o[0] = nd::from_float<nd::f16>(a.x * inv);
                    o[1] = nd::from_float<nd::f16>(a.y * inv);
                    o[2] = nd::from_float<nd::f16>(a.z * inv);
                    o[3] = nd::from_float<nd::f16>(a.w * inv);
                }
            }
        }
        // Next: the group with the most unclaimed tiles, 8 groups per lane per round trip.
        vg = -1;
        own = false;
#ifdef ST_NOCLAIM
        break;
#endif
        if (!stealing) break;
        for (int base = 0; base < G && vg < 0; base += 256) {
            int best = -1, best_rem = ST_MIN - 1;
            unsigned long long w[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int g = base + 8 * lane + i;
                w[i] = g < G ? *reinterpret_cast<volatile unsigned long long *>(st_word + 32 * g) : ~0ull;
            }
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int g = base + 8 * lane + i;
                if (g >= G) continue;
                const int rem = j_end - (chunks + int(unsigned(w[i])));
                if (int(w[i] >> 32) < ST_MAXS && rem > best_rem) best_rem = rem, best = g;
            }
            // the warp's best: most tiles left
            int key = best < 0 ? -1 : best_rem;
#pragma unroll
            for (int o = 16; o; o >>= 1) key = max(key, __shfl_xor_sync(0xffffffffu, key, o));
            if (key < 0) continue;
            const unsigned who = __ballot_sync(0xffffffffu, best >= 0 && best_rem == key);
            const int cand = __shfl_sync(0xffffffffu, best, __ffs(who) - 1);
            // a slot first, then a tile: a thief never holds a tile without a slot (a slot without a
            // tile stays unflagged)
            int got_slot = -1, got_tile = -1;
            if (threadIdx.x == 0) {
                unsigned *const cw = st_word + 32 * cand;
                const int sl = int(atomicAdd(cw + 1, 1u));
                if (sl < ST_MAXS) {
                    const int tile = chunks + int(atomicAdd(cw, 1u));
                    if (tile < j_end) got_slot = sl, got_tile = tile;
                }
            }
            got_slot = __shfl_sync(0xffffffffu, got_slot, 0);
            got_tile = __shfl_sync(0xffffffffu, got_tile, 0);
            if (got_slot >= 0) {
                vg = cand;
                slot = got_slot;
                first = got_tile;
            } else {
                base -= 256;  // lost the race for that group: look again
            }
        }
    }
#ifdef ST_PROBE
    if (threadIdx.x == 0 && blk < 4096) st_stamp[4 * blk + 2] = st_now();
#endif
    // The launch's last block resets the claim words for the next launch.
    unsigned last_block = 0;
    if (threadIdx.x == 0) {
        unsigned before;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(before) : "l"(&st_exit) : "memory");
        last_block = before + 1 == gridDim.x * gridDim.y * gridDim.z;
    }
    last_block = __shfl_sync(0xffffffffu, last_block, 0);
#ifdef ST_STATS
    if (last_block && lane == 0) {
        printf("steal: %u segments, %u tiles stolen\n", st_segments, st_tiles_stolen);
        st_segments = 0;
        st_tiles_stolen = 0;
    }
#endif
#ifdef ST_PROBE
    if (last_block && lane == 0) {
        if (st_launch == 6) {
            const int n = min(int(gridDim.x * gridDim.y * gridDim.z), 4096);
            for (int i = 0; i < n; ++i)
                printf("PROBE %llu %d 0 0 %llu %llu %llu %llu 0\n", st_stamp[4 * i + 3], i, st_stamp[4 * i],
                       st_stamp[4 * i + 1], st_stamp[4 * i + 1], st_stamp[4 * i + 2]);
        }
        ++st_launch;
    }
#endif
    if (last_block) {
        for (int g = lane; g < G && g < ST_MAXG; g += 32) st_word[32 * g] = 0, st_word[32 * g + 1] = 0;
        if (lane == 0) st_exit = 0;
    }
}
