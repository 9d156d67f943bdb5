#ifndef NEPTUNE_DEVICE_HOPPER_CUH
#define NEPTUNE_DEVICE_HOPPER_CUH
/** \file
 * The Hopper (sm_90a) instructions of the device library: TMA tile copies completing on mbarriers,
 * warpgroup MMA (wgmma) on 128-byte-swizzled shared tiles and register fragments, the fences that
 * order them, and register reallocation between warp roles. The emitted kernel decides the order
 * of these calls, the barrier phases and the roles; this header only wraps one instruction (or one
 * tile's worth of instructions) per function. Declared only when compiling for sm_90a (or for the
 * host), so using it for another architecture fails to compile. */
#include "neptune/device/tile.cuh"
#include "neptune/device/types.cuh"
#include "neptune/device/wgmma_ops.cuh"

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)

namespace neptune::device {

/** A TMA descriptor as the driver encodes it (CUtensorMap): passed to kernels by value as a
 * `const __grid_constant__` parameter, so that its address is one TMA can read. */
struct alignas(64) tensor_map {
    unsigned long long opaque[16];
};

// ---- mbarriers -----------------------------------------------------------------------------------

/** One thread initialises; then fence_barrier_init and a CTA barrier before any other use. */
NEPTUNE_DEVICE_INLINE void mbarrier_init(unsigned long long *bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" : : "r"(smem_address(bar)), "r"(arrivals) : "memory");
}
NEPTUNE_DEVICE_INLINE void fence_barrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" : : : "memory"); }
/** Arrives once and announces `bytes` of copies that will complete on the barrier. */
NEPTUNE_DEVICE_INLINE void mbarrier_arrive_expect_tx(unsigned long long *bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :
                 : "r"(smem_address(bar)), "r"(bytes)
                 : "memory");
}
NEPTUNE_DEVICE_INLINE void mbarrier_arrive(unsigned long long *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" : : "r"(smem_address(bar)) : "memory");
}
/** Arrives once on the barrier at `bar`'s offset in each of the cluster's first N blocks (this one
 * included): a buffer that all of them write (a multicast tile) is free once all of them released it. */
template <int N>
NEPTUNE_DEVICE_INLINE void mbarrier_arrive_cluster(unsigned long long *bar) {
    const unsigned local = smem_address(bar);
#pragma unroll
    for (int r = 0; r < N; ++r) {
        unsigned remote;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(r));
        asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" : : "r"(remote) : "memory");
    }
}
/** Returns once the phase of parity `parity` has completed (a fresh barrier is in phase 0, so a
 * wait for parity 1 returns at once: the first pass through a ring of empty buffers). */
NEPTUNE_DEVICE_INLINE void mbarrier_wait(unsigned long long *bar, unsigned parity) {
    unsigned done = 0;
    const unsigned addr = smem_address(bar);
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(addr), "r"(parity)
            : "memory");
    } while (!done);
}

// ---- Thread block clusters -------------------------------------------------------------------------

/** This block's rank in its cluster, and the cluster's blocks (1 in a launch without clusters). */
NEPTUNE_DEVICE_INLINE unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
NEPTUNE_DEVICE_INLINE unsigned cluster_size() {
    unsigned n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
}
/** Every block of the cluster arrives, then waits for all: shared writes before it (release) are
 * visible to the cluster's blocks after it (acquire). Every thread calls it. */
NEPTUNE_DEVICE_INLINE void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" : : : "memory");
}
/** The generic address of `p`, in this block's shared memory, in the shared memory of the cluster's
 * block `rank` (a rank of the cluster). */
template <typename T>
NEPTUNE_DEVICE_INLINE const T *cluster_map(const T *p, int rank) {
    unsigned long long out;
    asm("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"(reinterpret_cast<unsigned long long>(p)), "r"(unsigned(rank)));
    return reinterpret_cast<const T *>(out);
}
// ---- TMA -----------------------------------------------------------------------------------------

NEPTUNE_DEVICE_INLINE void tma_prefetch(const tensor_map &map) {
    asm volatile("prefetch.tensormap [%0];" : : "l"(reinterpret_cast<unsigned long long>(&map)) : "memory");
}

/** Copies the box at element coordinates (c0, c1, c2) of `map` (innermost first) to `dst`, completing
 * `bar`'s transactions; what lies outside the tensor arrives as zeros. */
NEPTUNE_DEVICE_INLINE void tma_load_3d(void *dst, const tensor_map &map, unsigned long long *bar, int c0, int c1,
                                       int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
        :
        : "r"(smem_address(dst)), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(c2),
          "r"(smem_address(bar))
        : "memory");
}

/** Issues the copies of rows [row0, row0 + ROWS) of `plane` into `dst`, one 64-column box per
 * column block; all of it completes on `bar`, which expects tma_tile_bytes<...> bytes. */
template <typename T, int ROWS, int COLS>
NEPTUNE_DEVICE_INLINE void tma_load_tile(swizzled_tile<T, ROWS, COLS> dst, const tensor_map &map, int row0, int plane,
                                         unsigned long long *bar) {
#pragma unroll
    for (int b = 0; b < COLS / 64; ++b) tma_load_3d(dst.ptr + b * ROWS * 64, map, bar, 64 * b, row0, plane);
}

/** As tma_load_3d in a 4-D tensor: the box at (c0, c1, c2, c3). */
NEPTUNE_DEVICE_INLINE void tma_load_4d(void *dst, const tensor_map &map, unsigned long long *bar, int c0, int c1,
                                       int c2, int c3) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6];"
        :
        : "r"(smem_address(dst)), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
          "r"(smem_address(bar))
        : "memory");
}

/** As above in a 4-D map of [batch, heads, rows, cols] (a strided attention tensor): rows
 * [row0, row0 + ROWS) of (batch, head). */
template <typename T, int ROWS, int COLS>
NEPTUNE_DEVICE_INLINE void tma_load_tile(swizzled_tile<T, ROWS, COLS> dst, const tensor_map &map, int row0, int head,
                                         int batch, unsigned long long *bar) {
#pragma unroll
    for (int b = 0; b < COLS / 64; ++b) tma_load_4d(dst.ptr + b * ROWS * 64, map, bar, 64 * b, row0, head, batch);
}

/** As tma_load_4d, the box landing at the same offset in the shared memory of the cluster's blocks
 * in `mask`, each of whose barriers at `bar`'s offset counts the box's bytes. */
NEPTUNE_DEVICE_INLINE void tma_load_4d_multicast(void *dst, const tensor_map &map, unsigned long long *bar, int c0,
                                                 int c1, int c2, int c3, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
        "{%2, "
        "%3, %4, %5}], [%6], %7;"
        :
        : "r"(smem_address(dst)), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
          "r"(smem_address(bar)), "h"(mask)
        : "memory");
}

/** The tile of tma_load_tile (4-D), shared by the cluster's first N blocks: this block copies its
 * 1/N of the rows (boxes of ROWS / N rows) into every one of them. Each block's barrier expects the
 * whole tile's bytes, which the N blocks' copies deliver together. */
template <int N, typename T, int ROWS, int COLS>
NEPTUNE_DEVICE_INLINE void tma_load_tile_multicast(swizzled_tile<T, ROWS, COLS> dst, const tensor_map &map, int row0,
                                                   int head, int batch, unsigned long long *bar) {
    static_assert(ROWS % (8 * N) == 0, "tma_load_tile_multicast: whole 8-row swizzle periods per block");
    const int part = int(cluster_rank()) % N, rows = ROWS / N;
#pragma unroll
    for (int b = 0; b < COLS / 64; ++b)
        tma_load_4d_multicast(dst.ptr + b * ROWS * 64 + part * rows * 64, map, bar, 64 * b, row0 + part * rows, head,
                              batch, (unsigned short)((1u << N) - 1u));
}

/** Ordinary shared-memory writes made visible to the async proxy (TMA stores, wgmma reads). */
NEPTUNE_DEVICE_INLINE void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" : : : "memory"); }

// ---- Warp roles ----------------------------------------------------------------------------------

/** The warpgroup's register budget becomes N (a multiple of 8 in [24, 256]); needs a register count
 * at kernel entry (__launch_bounds__(threads, 1)) and all four warps of the warpgroup. */
template <int N>
NEPTUNE_DEVICE_INLINE void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" : : "n"(N));
}
template <int N>
NEPTUNE_DEVICE_INLINE void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" : : "n"(N));
}

// ---- wgmma ---------------------------------------------------------------------------------------

NEPTUNE_DEVICE_INLINE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" : : : "memory"); }
NEPTUNE_DEVICE_INLINE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" : : : "memory"); }
template <int N>
NEPTUNE_DEVICE_INLINE void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" : : "n"(N) : "memory");
}

/** Tells the compiler that every register of `c` may change here: NVVM does not know that wgmma
 * writes its accumulators asynchronously, so reads of c are fenced behind the wait this way. */
template <int MT, int NT>
NEPTUNE_DEVICE_INLINE void fence_registers(acc_tile<MT, NT> &c) {
    for_each_register(c, [](float &e, int, int, int) { asm volatile("" : "+f"(e) : : "memory"); });
}

/** The same for a register A operand that an asynchronous wgmma may still read. */
template <typename T, int MT, int KT>
NEPTUNE_DEVICE_INLINE void fence_registers(a_tile<T, MT, KT> &a) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int k = 0; k < KT; ++k)
#pragma unroll
            for (int r = 0; r < 4; ++r) asm volatile("" : "+r"(a.v[m][k][r]) : : "memory");
}

/** A shared-memory matrix descriptor for the 128-byte swizzle: start address, leading and stride
 * byte offsets (16-byte units, 14 bits each), swizzle mode 1 in bits 62-63. */
NEPTUNE_DEVICE_INLINE unsigned long long swizzle128_descriptor(unsigned addr, unsigned leading_bytes,
                                                               unsigned stride_bytes) {
    return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
           static_cast<unsigned long long>((leading_bytes >> 4) & 0x3FFF) << 16 |
           static_cast<unsigned long long>((stride_bytes >> 4) & 0x3FFF) << 32 | 1ull << 62;
}

/** c = [c +] a[a_row0 .. a_row0 + 64) b^T for this warpgroup: a (M x K) and b (N x K, N = 8 NT = its
 * rows) are K-major swizzled tiles (S = Q K^T: both [rows][head dim]). Issues K / 16 wgmmas (SS) and
 * commits them as one group; the result is there after wgmma_wait. K-major 128B-swizzled operands:
 * 8-row groups 1024 bytes apart (stride offset), a k16 step 32 bytes further in the 128-byte row,
 * the next 64 columns one column block further. */
template <typename T, int NT, int RA, int RB, int K>
NEPTUNE_DEVICE_INLINE void wgmma_abt(acc_tile<1, NT> &c, swizzled_tile<T, RA, K> a, int a_row0,
                                     swizzled_tile<T, RB, K> b, bool accumulate) {
    static_assert(8 * NT == RB, "wgmma_abt: the accumulator has one column per row of b");
    float(&d)[4 * NT] = reinterpret_cast<float(&)[4 * NT]>(c.v[0]);
    const unsigned a0 = smem_address(a.ptr) + unsigned(a_row0) * 128u, b0 = smem_address(b.ptr);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < K / 16; ++k) {
        const unsigned off = unsigned(k % 4) * 32u;
        const unsigned long long da = swizzle128_descriptor(a0 + (k / 4) * a.block_bytes + off, 16, 1024);
        const unsigned long long db = swizzle128_descriptor(b0 + (k / 4) * b.block_bytes + off, 16, 1024);
        wgmma_op<T, 8 * NT>::template ss<0, 0>(d, da, db, (accumulate || k > 0) ? 1 : 0);
    }
    wgmma_commit();
}

/** c = [c +] a b for this warpgroup: a is the register A operand (64 x 16 KT, e.g. P converted from
 * an accumulator), b the first 16 KT rows of a swizzled tile whose columns are N = 8 NT (O += P V,
 * V stored [key][head dim]: MN-major, so transposed in the instruction). MN-major 128B-swizzled B:
 * 64-column blocks one block apart (leading offset), 8-key groups 1024 bytes apart (stride offset),
 * a k16 step 16 rows = 2048 bytes further. Commits one group. */
template <typename T, int NT, int KT, int RB, int COLS>
NEPTUNE_DEVICE_INLINE void wgmma_ab(acc_tile<1, NT> &c, const a_tile<T, 1, KT> &a, swizzled_tile<T, RB, COLS> b,
                                    bool accumulate) {
    static_assert(8 * NT == COLS, "wgmma_ab: the accumulator has b's columns");
    static_assert(16 * KT <= RB, "wgmma_ab: b has fewer rows than a has columns");
    float(&d)[4 * NT] = reinterpret_cast<float(&)[4 * NT]>(c.v[0]);
    const unsigned b0 = smem_address(b.ptr);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < KT; ++k) {
        const unsigned long long db = swizzle128_descriptor(b0 + unsigned(k) * 2048u, b.block_bytes, 1024);
        wgmma_op<T, 8 * NT>::template rs<1>(d, a.v[0][k], db, (accumulate || k > 0) ? 1 : 0);
    }
    wgmma_commit();
}

}  // namespace neptune::device

#endif
#endif
