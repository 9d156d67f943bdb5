#ifndef NEPTUNE_TEST_DEVICE_HOPPER_KERNELS_H
#define NEPTUNE_TEST_DEVICE_HOPPER_KERNELS_H
/** \file
 * Test kernels of the device library's Hopper instructions, as CUDA source for NVRTC (sm_90a): the
 * GPU test runs them, the NVRTC compile test checks that they compile without spills. */

namespace neptune::testing {

inline const char *hopper_kernels = R"(
#include "neptune/device/neptune_device.cuh"
namespace nd = neptune::device;

// Dynamic shared memory from a 1024-byte aligned address (swizzle and TMA need it; launches ask for
// 2048 bytes more), an mbarrier in its first bytes and the tiles from byte 1024.
struct Smem { unsigned long long *bar; unsigned char *tiles; };
__device__ Smem aligned_smem() {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char *p = smem_raw + ((1024u - (nd::smem_address(smem_raw) & 1023u)) & 1023u);
    return {reinterpret_cast<unsigned long long *>(p), p + 1024};
}
__device__ void init_barrier(const Smem &sm) {
    if (threadIdx.x == 0) {
        nd::mbarrier_init(sm.bar, 1);
        nd::fence_barrier_init();
    }
    __syncthreads();
}

// The tile at (row0, plane) read back through swizzled_tile::at.
template <int ROWS, int COLS>
__device__ void tma_tile(const nd::tensor_map &map, int row0, int plane, nd::f16 *out) {
    const Smem sm = aligned_smem();
    const nd::swizzled_tile<nd::f16, ROWS, COLS> tile{reinterpret_cast<nd::f16 *>(sm.tiles)};
    init_barrier(sm);
    if (threadIdx.x == 0) {
        nd::mbarrier_arrive_expect_tx(sm.bar, ROWS * COLS * 2);
        nd::tma_load_tile(tile, map, row0, plane, sm.bar);
    }
    nd::mbarrier_wait(sm.bar, 0);
    for (int i = threadIdx.x; i < ROWS * COLS; i += blockDim.x) out[i] = *tile.at(i / COLS, i % COLS);
}

// out = a b^T (+ 1 when accumulating), a warpgroup per 64 rows of a.
template <typename T, int RA, int N, int K>
__device__ void abt(const nd::tensor_map &a_map, const nd::tensor_map &b_map, int accumulate, float *out) {
    const Smem sm = aligned_smem();
    const nd::swizzled_tile<T, RA, K> a{reinterpret_cast<T *>(sm.tiles)};
    const nd::swizzled_tile<T, N, K> b{reinterpret_cast<T *>(sm.tiles + nd::swizzled_tile<T, RA, K>::bytes)};
    init_barrier(sm);
    if (threadIdx.x == 0) {
        nd::mbarrier_arrive_expect_tx(sm.bar, (RA + N) * K * 2);
        nd::tma_load_tile(a, a_map, 0, 0, sm.bar);
        nd::tma_load_tile(b, b_map, 0, 0, sm.bar);
    }
    nd::mbarrier_wait(sm.bar, 0);
    const int warp = nd::warp_id();
    nd::acc_tile<1, N / 8> c;
    nd::fill(c, 1.0f);
    nd::wgmma_abt(c, a, 64 * (warp / 4), b, accumulate != 0);
    nd::wgmma_wait<0>();
    nd::fence_registers(c);
    nd::store_acc_f32(out, N, c, 16 * warp, RA, N);
}

// out = a v: a (64 x 16 KT, row-major in global) into registers through ldmatrix, v swizzled RV x N.
template <typename T, int KT, int RV, int N>
__device__ void ab(const T *a_global, const nd::tensor_map &v_map, float *out) {
    const Smem sm = aligned_smem();
    const nd::swizzled_tile<T, RV, N> v{reinterpret_cast<T *>(sm.tiles)};
    const nd::smem_tile<T, 64, 16 * KT> a_s{reinterpret_cast<T *>(sm.tiles + nd::swizzled_tile<T, RV, N>::bytes)};
    init_barrier(sm);
    nd::load_tile_sync<128>(a_s, a_global, 16 * KT, 64, 16 * KT);
    __syncthreads();
    if (threadIdx.x == 0) {
        nd::mbarrier_arrive_expect_tx(sm.bar, RV * N * 2);
        nd::tma_load_tile(v, v_map, 0, 0, sm.bar);
    }
    const int warp = nd::warp_id();
    nd::a_tile<T, 1, KT> a;
    nd::load_a(a, a_s, 16 * warp);
    nd::mbarrier_wait(sm.bar, 0);
    nd::acc_tile<1, N / 8> c;
    nd::wgmma_ab(c, a, v, false);
    nd::wgmma_wait<0>();
    nd::fence_registers(c);
    nd::store_acc_f32(out, N, c, 16 * warp, 64, N);
}

#define TMA(R, C) extern "C" __global__ void tma_##R##x##C(const __grid_constant__ nd::tensor_map m, int row0, int plane, nd::f16 *out) { tma_tile<R, C>(m, row0, plane, out); }
TMA(64, 128)
TMA(128, 64)
#define ABT(T, RA, N, K) extern "C" __global__ void abt_##T##_##RA##_##N##_##K(const __grid_constant__ nd::tensor_map a, const __grid_constant__ nd::tensor_map b, int acc, float *out) { abt<nd::T, RA, N, K>(a, b, acc, out); }
#define AB(T, KT, RV, N) extern "C" __global__ void ab_##T##_##KT##_##RV##_##N(const nd::T *a, const __grid_constant__ nd::tensor_map v, float *out) { ab<nd::T, KT, RV, N>(a, v, out); }
#define ALL(T) ABT(T, 64, 64, 64) ABT(T, 128, 128, 128) ABT(T, 64, 64, 256) AB(T, 8, 128, 128) AB(T, 4, 128, 64) AB(T, 8, 128, 256)
ALL(f16)
ALL(bf16)
)";

}  // namespace neptune::testing

#endif
