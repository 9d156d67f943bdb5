/** \file
 * Instantiates every neptune::device op for f16 and bf16 and a few shapes (through the test
 * kernels) plus the attention kernel, for the compile checks: ptxas_check.py compiles it with nvcc
 * for sm_80, sm_90 and sm_90a, nvrtc_compile.cpp with NVRTC; both require no spills. Device code
 * only: NVRTC has no host compiler. */
#include "attention_fwd.cuh"
#include "op_kernels.cuh"

namespace neptune::device_test {

// The shapes are the ones device_ops.cu runs.
#define NEPTUNE_TEST_INSTANTIATE(T)                                                                                 \
    template __global__ void attention_fwd<T, false>(const T *, const T *, const T *, T *, int, float);             \
    template __global__ void attention_fwd<T, true>(const T *, const T *, const T *, T *, int, float);              \
    template __global__ void mma_kernel<T, 2, 1, 8, 8, false>(const T *, const T *, float *, T *, int, int);        \
    template __global__ void mma_kernel<T, 1, 2, 3, 2, false>(const T *, const T *, float *, T *, int, int);        \
    template __global__ void mma_kernel<T, 2, 1, 16, 4, true>(const T *, const T *, float *, T *, int, int);        \
    template __global__ void mma_kernel<T, 1, 2, 5, 1, true>(const T *, const T *, float *, T *, int, int);         \
    template __global__ void load_kernel<T, 64, 24, 40, false>(const T *, long long, int, int, T *);                \
    template __global__ void load_kernel<T, 64, 24, 40, true>(const T *, long long, int, int, T *);                 \
    template __global__ void load_kernel<T, 128, 64, 128, true>(const T *, long long, int, int, T *);               \
    template __global__ void mma_kernel<T, 2, 1, 8, 8, false, true>(const T *, const T *, float *, T *, int, int);  \
    template __global__ void mma_kernel<T, 1, 2, 3, 4, false, true>(const T *, const T *, float *, T *, int, int);  \
    template __global__ void mma_kernel<T, 2, 1, 16, 4, true, true>(const T *, const T *, float *, T *, int, int);  \
    template __global__ void mma_kernel<T, 1, 1, 5, 8, true, true>(const T *, const T *, float *, T *, int, int);   \
    template __global__ void load_swizzled_kernel<T, 32, 32, 128, true>(const T *, long long, int, int, T *);       \
    template __global__ void load_swizzled_kernel<T, 64, 24, 64, true>(const T *, long long, int, int, T *);        \
    template __global__ void load_swizzled_kernel<T, 64, 16, 128, false>(const T *, long long, int, int, T *);      \
    template __global__ void layout_kernel<T, 2, 4>(const float *, float *, float *);                               \
    template __global__ void layout_kernel<T, 1, 16>(const float *, float *, float *);                              \
    template __global__ void store_kernel<T, 2, 4>(const float *, T *, float *, float *, long long, int, int, int); \
    template __global__ void warp_rows_kernel<T, 4, 1, false>(const float *, const float *, T *, float *, float *,  \
                                                              long long, int, int, int, int, int);                  \
    template __global__ void warp_rows_kernel<T, 16, 2, false>(const float *, const float *, T *, float *, float *, \
                                                               long long, int, int, int, int, int);                 \
    template __global__ void warp_rows_kernel<T, 4, 1, true>(const float *, const float *, T *, float *, float *,   \
                                                             long long, int, int, int, int, int);

NEPTUNE_TEST_INSTANTIATE(nd::f16)
NEPTUNE_TEST_INSTANTIATE(nd::bf16)
#undef NEPTUNE_TEST_INSTANTIATE

template __global__ void reduce_kernel<2, 4>(const float *, const float *, const float *, float *, float *, float *,
                                             float *);
template __global__ void reduce_kernel<1, 8>(const float *, const float *, const float *, float *, float *, float *,
                                             float *);

}  // namespace neptune::device_test
