// The read-streaming ceiling of the GPU for decode's access pattern, without any attention work:
// 256 (batch, head) groups of K and V, 2 MiB each (decode_causal at B = 8, S = 8192, D = 128 fp16),
// split into chunks, each block streaming its chunk of K and of V as decode's partial kernel does.
// Variants: plain 16-byte loads (the copy-engine-free ceiling), the partial kernel's own load schedule
// (padded, unpadded and swizzled shared rows: the padded ones cost 8 %),
// cp.async rings with 1 or 4 warps per block, and Hopper's 1D bulk copies (cp.async.bulk, one
// instruction per tile) into an mbarrier ring. Prints TB/s (median of 15, L2 flushed before each run)
// per variant, so decode's partial kernel can be read against what streaming alone reaches. Inputs
// are random fp16 (RC_CONSTANT=1: constant bytes); RC_REPS=1 runs each variant once, for ncu; RC_EVICT=1
// compares evict-first copies with plain ones after a dirty and a clean L2 flush; RC_CLEAN=1 flushes
// by reading (L2 left clean) instead of writing (L2 left dirty, the benchmark's way); RC_ORDER=1 compares
// the order in which a block reads its tiles (in order, rotated start, chunks interleaved). Build on
// an sm_90 GPU (from the repository root):
//   nvcc -O3 -std=c++20 -arch=sm_90a -o read_ceiling experiments/read_ceiling.cu && ./read_ceiling
#include <cuda_runtime.h>

#include "../test/device/cuda_check.cuh"
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x) NEPTUNE_CUDA_CHECK(x)

constexpr int kGroups = 256;
constexpr size_t kStreamBytes = size_t(8192) * 256;  // one head's K (or V): 8192 keys x 256 B

__global__ void plain_loads(const uint4 *__restrict__ data, size_t n, unsigned *sink) {
    unsigned x = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        uint4 v = __ldcs(data + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x12345678u) sink[0] = x;  // keeps the loads; never true for random data
}

// An L2 policy that marks the lines a load brings in as the first to evict (read-once streams).
__device__ inline uint64_t evict_first_policy() {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}

// HINT: 0 none, 1 the L2::128B prefetch-size hint, 2 L2::256B (the sector fetch the L2 may widen),
// 3 an evict-first cache policy.
template <int HINT = 0>
__device__ inline void cp_async16(void *smem, const void *gmem, uint64_t policy = 0) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    if (HINT == 3)
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "l"(policy));
    else if (HINT == 2)
        asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
    else if (HINT == 1)
        asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
    else
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}

// grid (chunks, groups); block WARPS x 32; each stage holds TILE bytes of K and TILE of V.
template <int WARPS, int STAGES, int TILE, int HINT = 0>
__global__ void cp_async_ring(const char *__restrict__ k, const char *__restrict__ v, int chunks, unsigned *sink) {
    extern __shared__ __align__(128) char smem[];
    const size_t per_chunk = kStreamBytes / chunks / TILE * TILE;  // whole tiles: 16-byte aligned copies
    const size_t base = size_t(blockIdx.y) * kStreamBytes + blockIdx.x * per_chunk;
    const int tiles = int(per_chunk / TILE);
    const int tid = threadIdx.x;
    const uint64_t policy = HINT == 3 ? evict_first_policy() : 0;
    auto issue = [&](int t) {
        char *s = smem + (t % STAGES) * 2 * TILE;
        for (int o = tid * 16; o < TILE; o += WARPS * 32 * 16) {
            cp_async16<HINT>(s + o, k + base + size_t(t) * TILE + o, policy);
            cp_async16<HINT>(s + TILE + o, v + base + size_t(t) * TILE + o, policy);
        }
        asm volatile("cp.async.commit_group;\n");
    };
    for (int t = 0; t < STAGES - 1; ++t) issue(t < tiles ? t : tiles - 1);
    unsigned x = 0;
    for (int t = 0; t < tiles; ++t) {
        issue(t + STAGES - 1 < tiles ? t + STAGES - 1 : tiles - 1);
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 1));
        __syncthreads();
        const unsigned *s = reinterpret_cast<const unsigned *>(smem + (t % STAGES) * 2 * TILE);
        for (int o = tid; o < 2 * TILE / 4; o += WARPS * 32 * 8) x ^= s[o];
        __syncthreads();
    }
    if (x == 0x12345678u) sink[0] = x;
}

__device__ inline void mbar_init(uint64_t *bar, unsigned count) {
    unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(b), "r"(count));
}
__device__ inline void mbar_expect(uint64_t *bar, unsigned bytes) {
    unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes));
}
__device__ inline void mbar_wait(uint64_t *bar, unsigned phase) {
    unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
    asm volatile(
        "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}\n" ::"r"(b),
        "r"(phase));
}
template <bool EVICT_FIRST = false>
__device__ inline void bulk_copy(void *smem, const void *gmem, unsigned bytes, uint64_t *bar, uint64_t policy = 0) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
    if (EVICT_FIRST)
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], "
            "%4;\n" ::"r"(s),
            "l"(gmem), "r"(bytes), "r"(b), "l"(policy)
            : "memory");
    else
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(s),
            "l"(gmem), "r"(bytes), "r"(b)
            : "memory");
}

// As cp_async_ring, but thread 0 moves each stage with two bulk copies (K and V) on an mbarrier.
// ORDER: which tile a block reads at step t. 0: its chunk in order; 1: its chunk from a start that
// differs per block (rotated), so the blocks in flight read different offsets of their streams rather
// than the same one; 2: the chunks interleaved (chunk c reads tiles c, c + chunks, ...).
template <int WARPS, int STAGES, int TILE, bool EVICT_FIRST = false, int ORDER = 0>
__global__ void bulk_ring(const char *__restrict__ k, const char *__restrict__ v, int chunks, unsigned *sink) {
    extern __shared__ __align__(128) char smem[];
    __shared__ uint64_t bars[STAGES];
    const size_t per_chunk = kStreamBytes / chunks / TILE * TILE;  // whole tiles: 16-byte aligned copies
    const size_t base = size_t(blockIdx.y) * kStreamBytes + blockIdx.x * per_chunk;
    const int tiles = int(per_chunk / TILE);
    const int tid = threadIdx.x;
    if (tid == 0)
        for (int s = 0; s < STAGES; ++s) mbar_init(&bars[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    __syncthreads();
    const uint64_t policy = EVICT_FIRST ? evict_first_policy() : 0;
    const int rot = int((blockIdx.y * 37u + blockIdx.x * 101u) % unsigned(tiles));
    auto issue = [&](int t) {
        if (tid != 0 || t >= tiles) return;
        char *s = smem + (t % STAGES) * 2 * TILE;
        size_t off = size_t(t) * TILE;
        if (ORDER == 1) off = size_t((t + rot) % tiles) * TILE;
        if (ORDER == 2) off = size_t(t * chunks) * TILE + size_t(blockIdx.x) * TILE - size_t(blockIdx.x) * per_chunk;
        mbar_expect(&bars[t % STAGES], 2 * TILE);
        bulk_copy<EVICT_FIRST>(s, k + base + off, TILE, &bars[t % STAGES], policy);
        bulk_copy<EVICT_FIRST>(s + TILE, v + base + off, TILE, &bars[t % STAGES], policy);
    };
    for (int t = 0; t < STAGES - 1; ++t) issue(t);
    unsigned x = 0;
    for (int t = 0; t < tiles; ++t) {
        issue(t + STAGES - 1);
        mbar_wait(&bars[t % STAGES], (t / STAGES) & 1);
        const unsigned *s = reinterpret_cast<const unsigned *>(smem + (t % STAGES) * 2 * TILE);
        for (int o = tid; o < 2 * TILE / 4; o += WARPS * 32 * 8) x ^= s[o];
        __syncthreads();  // the stage is free before it is refilled
    }
    if (x == 0x12345678u) sink[0] = x;
}

// decode's partial kernel's load schedule without its arithmetic: one warp, 32-key K and V tiles
// (256-byte rows) into shared rows of PITCH bytes (the kernel pads them to 272), the zero-fill
// (src-size) form of cp.async. SEPARATE: K and V in their own commit groups, each refilled once its
// previous tile has landed (the kernel's order); otherwise one group per stage, issued before the
// wait for the current one (the ring's order). SWIZZLE: 256-byte rows with the 16-byte chunk index
// XORed by the row (mod 8), the bank-conflict-free alternative to padding.
template <int PITCH, bool SEPARATE, bool SWIZZLE>
__global__ void partial_schedule(const char *__restrict__ k, const char *__restrict__ v, int chunks, unsigned *sink) {
    extern __shared__ __align__(128) char smem[];
    constexpr int kRows = 32, kRow = 256, kTile = kRows * PITCH;
    const int tiles_total = int(kStreamBytes / (kRows * kRow));
    const int per_chunk = (tiles_total + chunks - 1) / chunks;
    const int j0 = min(int(blockIdx.x) * per_chunk, tiles_total), j1 = min(j0 + per_chunk, tiles_total);
    const char *kb = k + size_t(blockIdx.y) * kStreamBytes;
    const char *vb = v + size_t(blockIdx.y) * kStreamBytes;
    const int tid = threadIdx.x;
    auto load = [&](char *s, const char *g, int j) {
        if (j >= j1) return;
        for (int i = tid; i < kRows * kRow / 16; i += 32) {
            const int r = i / 16, c = i % 16;
            const int sc = SWIZZLE ? (c ^ (r % 8)) : c;
            unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(s + r * PITCH + sc * 16));
            const char *src = g + size_t(j) * kRows * kRow + r * kRow + c * 16;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(16));
        }
    };
    auto commit = [] { asm volatile("cp.async.commit_group;\n"); };
    char *ks = smem;
    char *vs = smem + 2 * kTile;
    unsigned x = 0;
    if (SEPARATE) {
        load(ks, kb, j0), commit();
        load(vs, vb, j0), commit();
        for (int j = j0; j < j1; ++j) {
            const int st = (j - j0) % 2;
            asm volatile("cp.async.wait_group 1;\n");
            __syncwarp();
            load(ks + (1 - st) * kTile, kb, j + 1), commit();
            x ^= reinterpret_cast<const unsigned *>(ks + st * kTile)[tid];
            asm volatile("cp.async.wait_group 1;\n");
            __syncwarp();
            load(vs + (1 - st) * kTile, vb, j + 1), commit();
            x ^= reinterpret_cast<const unsigned *>(vs + st * kTile)[tid];
        }
    } else {
        for (int j = j0; j < j1; ++j) {
            const int st = (j - j0) % 2;
            if (j == j0) load(ks, kb, j0), load(vs, vb, j0), commit();
            load(ks + (1 - st) * kTile, kb, j + 1), load(vs + (1 - st) * kTile, vb, j + 1), commit();
            asm volatile("cp.async.wait_group 1;\n");
            __syncwarp();
            x ^= reinterpret_cast<const unsigned *>(ks + st * kTile)[tid];
            x ^= reinterpret_cast<const unsigned *>(vs + st * kTile)[tid];
            __syncwarp();
        }
    }
    if (x == 0x12345678u) sink[0] = x;
}

__global__ void fill_random(unsigned *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        unsigned h = unsigned(i) * 2654435761u ^ seed * 0x9e3779b9u;
        h ^= h >> 16;
        h *= 0x85ebca6bu;
        h ^= h >> 13;
        p[i] = h & 0x3bff3bffu;  // two fp16 values in [0, 1): finite, like real activations
    }
}

// Reads every byte of the flush buffer: L2 is left holding clean lines, which a kernel evicts for free.
__global__ void read_all(const uint4 *__restrict__ data, size_t n, unsigned *sink) {
    unsigned x = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        uint4 v = data[i];
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x12345678u) sink[0] = x;
}

struct Bench {
    char *k, *v, *flush;
    unsigned *sink;
    size_t flush_bytes = size_t(512) << 20;
    // How L2 is flushed before each run: by writing the buffer (the benchmark's way: L2 is left full of
    // dirty lines that the timed kernel's misses must write back) or, with clean_flush, by reading it.
    bool clean_flush = false;
    cudaEvent_t a, b;
    template <class F>
    double tbps(F launch) {
        std::vector<float> ms;
        // RC_REPS=1 runs each variant once (for ncu, which replays each launch itself).
        const int reps = std::getenv("RC_REPS") ? std::atoi(std::getenv("RC_REPS")) : 18, warm = reps > 3 ? 3 : 0;
        for (int r = 0; r < reps; ++r) {
            if (clean_flush)
                read_all<<<1024, 256>>>(reinterpret_cast<const uint4 *>(flush), flush_bytes / 16, sink);
            else
                CHECK(cudaMemsetAsync(flush, r, flush_bytes));
            CHECK(cudaEventRecord(a));
            launch();
            CHECK(cudaEventRecord(b));
            CHECK(cudaEventSynchronize(b));
            float t;
            CHECK(cudaEventElapsedTime(&t, a, b));
            if (r >= warm) ms.push_back(t);
        }
        CHECK(cudaGetLastError());
        std::sort(ms.begin(), ms.end());
        return 2.0 * kGroups * kStreamBytes / (ms[ms.size() / 2] * 1e-3) /
               1e12;  // (a chunk split's remainder, < 1 %, is left unread)
    }
};

template <int PITCH, bool SEPARATE, bool SWIZZLE>
void schedule(Bench &b, int chunks) {
    auto kern = partial_schedule<PITCH, SEPARATE, SWIZZLE>;
    const int shared = 4 * 32 * PITCH;
    int resident = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kern, 32, shared));
    double r = b.tbps([&] { kern<<<dim3(chunks, kGroups), 32, shared>>>(b.k, b.v, chunks, b.sink); });
    std::printf("partial schedule: pitch %d %s%s chunks %d  resident %2d/SM  %.2f TB/s\n", PITCH,
                SEPARATE ? "K, V groups refilled on landing" : "one group per stage, issued ahead",
                SWIZZLE ? ", swizzled" : "", chunks, resident, r);
}

// KIND: 0-2 cp.async with HINT = KIND (none, L2::128B, L2::256B), 3 bulk copies; 4 and 5: cp.async and
// bulk copies with an evict-first L2 policy.
const char *const kKindNames[] = {"cp.async", "cp.async L2::128B",  "cp.async L2::256B",
                                  "bulk",     "cp.async evict-1st", "bulk evict-1st"};

template <int WARPS, int STAGES, int TILE, int KIND, int ORDER = 0>
void ring(Bench &b, int chunks) {
    int shared = STAGES * 2 * TILE;
    if (shared > 227 * 1024) return;
    auto kern = KIND == 5   ? bulk_ring<WARPS, STAGES, TILE, true, ORDER>
                : KIND == 4 ? cp_async_ring<WARPS, STAGES, TILE, 3>
                : KIND == 3 ? bulk_ring<WARPS, STAGES, TILE, false, ORDER>
                            : cp_async_ring<WARPS, STAGES, TILE, KIND % 3>;
    CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    int resident = 0, sms = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kern, WARPS * 32, shared));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    double r = b.tbps([&] { kern<<<dim3(chunks, kGroups), WARPS * 32, shared>>>(b.k, b.v, chunks, b.sink); });
    std::printf("%-18s %s%s warps %d stages %d tile %6d B chunks %2d  resident %2d/SM  waves %.2f  %.2f TB/s\n",
                kKindNames[KIND], b.clean_flush ? "clean L2" : "dirty L2",
                ORDER == 1   ? " rotated"
                : ORDER == 2 ? " interleaved"
                             : "",
                WARPS, STAGES, TILE, chunks, resident, double(chunks) * kGroups / (resident * sms), r);
}

// Every kind at one (warps, stages, tile) shape, for 1 to 3 chunks.
template <int WARPS, int STAGES, int TILE>
void ring_shape(Bench &b) {
    for (int chunks : {1, 2, 3}) {
        ring<WARPS, STAGES, TILE, 0>(b, chunks);
        ring<WARPS, STAGES, TILE, 1>(b, chunks);
        ring<WARPS, STAGES, TILE, 2>(b, chunks);
        ring<WARPS, STAGES, TILE, 3>(b, chunks);
    }
}

int main() {
    Bench b;
    size_t bytes = size_t(kGroups) * kStreamBytes;
    CHECK(cudaMalloc(&b.k, bytes));
    CHECK(cudaMalloc(&b.v, bytes));
    CHECK(cudaMalloc(&b.flush, b.flush_bytes));
    CHECK(cudaMalloc(&b.sink, 4));
    // Random bytes by default (like the benchmark's inputs); RC_CONSTANT=1 fills constants instead.
    if (std::getenv("RC_CONSTANT")) {
        CHECK(cudaMemset(b.k, 1, bytes));
        CHECK(cudaMemset(b.v, 2, bytes));
    } else {
        fill_random<<<1024, 256>>>(reinterpret_cast<unsigned *>(b.k), bytes / 4, 1u);
        fill_random<<<1024, 256>>>(reinterpret_cast<unsigned *>(b.v), bytes / 4, 2u);
        CHECK(cudaDeviceSynchronize());
    }
    CHECK(cudaEventCreate(&b.a));
    CHECK(cudaEventCreate(&b.b));
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    b.clean_flush = std::getenv("RC_CLEAN") != nullptr;  // RC_CLEAN=1: flush by reading, L2 left clean
    // RC_ORDER=1: only the tile-order matrix: each block's chunk in order, from a rotated start, and
    // the chunks interleaved, after a dirty and a clean flush.
    if (std::getenv("RC_ORDER")) {
        for (bool clean : {false, true}) {
            b.clean_flush = clean;
            for (int round = 0; round < 2; ++round)
                for (int chunks : {2, 4}) {
                    ring<1, 2, 8192, 3, 0>(b, chunks);  // decode_causal's kernel at B = 8 (one warp, 32 keys)
                    ring<1, 2, 8192, 3, 1>(b, chunks);
                    ring<1, 2, 8192, 3, 2>(b, chunks);
                    ring<1, 3, 8192, 3, 0>(b, chunks);
                    ring<1, 3, 8192, 3, 1>(b, chunks);
                }
            ring<4, 2, 32768, 3, 0>(b, 1);  // cuDNN's shape at B = 8
            ring<4, 2, 32768, 3, 1>(b, 1);
        }
        return 0;
    }
    // RC_EVICT=1: only the eviction-policy matrix: normal and evict-first copies, after a flush that
    // leaves L2 dirty (writes, the benchmark's way) and one that leaves it clean (reads).
    if (std::getenv("RC_EVICT")) {
        for (bool clean : {false, true}) {
            b.clean_flush = clean;
            for (int chunks : {2, 3}) {
                ring<1, 2, 8192, 0>(b, chunks);  // decode's partial kernel's ring (one warp, 32 keys, 2 stages)
                ring<1, 2, 8192, 4>(b, chunks);
                ring<1, 2, 8192, 3>(b, chunks);
                ring<1, 2, 8192, 5>(b, chunks);
            }
            ring<4, 2, 32768, 0>(b, 1);  // cuDNN's shape at B = 8: four warps, 128-key tiles, no split
            ring<4, 2, 32768, 4>(b, 1);
        }
        return 0;
    }
    for (int per_sm : {4, 8, 16}) {
        double r = b.tbps([&] {
            plain_loads<<<sms * per_sm, 256>>>(reinterpret_cast<const uint4 *>(b.k), bytes / 16, b.sink);
            plain_loads<<<sms * per_sm, 256>>>(reinterpret_cast<const uint4 *>(b.v), bytes / 16, b.sink);
        });
        std::printf("plain 16-byte loads, %d blocks of 256 per SM: %.2f TB/s\n", per_sm, r);
    }
    for (int chunks : {2, 3}) {
        schedule<272, true, false>(b, chunks);  // the partial kernel now
        schedule<256, true, false>(b, chunks);  // unpadded rows
        schedule<256, true, true>(b, chunks);  // swizzled rows
        schedule<272, false, false>(b, chunks);  // the ring's order, padded rows
        schedule<256, false, true>(b, chunks);  // the ring's order, swizzled rows
    }
    // RC_GRID=1: only the grid of ring shapes (warps x stages x tile bytes x chunks x copy kind).
    if (std::getenv("RC_GRID")) {
        ring_shape<1, 2, 8192>(b);  // decode's partial kernel (one warp, 32 keys) with 2 stages
        ring_shape<1, 3, 8192>(b);  // and with 3 (the default now)
        ring_shape<1, 4, 8192>(b);
        ring_shape<1, 2, 16384>(b);  // one warp, 64-key tiles
        ring_shape<1, 3, 16384>(b);
        ring_shape<2, 3, 8192>(b);
        ring_shape<2, 2, 16384>(b);
        ring_shape<4, 2, 16384>(b);  // four warps, 64-key tiles
        ring_shape<4, 3, 16384>(b);
        ring_shape<4, 2, 32768>(b);  // four warps, 128-key tiles (cuDNN's tile at B = 8)
        ring_shape<4, 3, 32768>(b);
        ring_shape<8, 2, 32768>(b);
        return 0;
    }
    for (int kind : {0, 3}) {
        auto shape = [&](auto f) { kind == 0 ? f.template operator()<0>() : f.template operator()<3>(); };
        shape([&]<int K>() {
            ring<1, 2, 8192, K>(b, 2);  // decode's partial kernel (one warp, 32 keys)
            ring<1, 2, 8192, K>(b, 3);
            ring<1, 3, 8192, K>(b, 2);
            ring<1, 2, 16384, K>(b, 2);
            ring<4, 2, 16384, K>(b, 2);  // four warps on 64-key tiles
            ring<4, 3, 16384, K>(b, 2);
            ring<4, 2, 32768, K>(b, 2);
            ring<4, 4, 16384, K>(b, 1);
            ring<4, 3, 16384, K>(b, 4);
        });
    }
    return 0;
}
