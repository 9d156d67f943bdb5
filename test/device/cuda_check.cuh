#ifndef NEPTUNE_TEST_DEVICE_CUDA_CHECK_CUH
#define NEPTUNE_TEST_DEVICE_CUDA_CHECK_CUH
/** \file
 * Error checks of the device tests' CUDA runtime calls: any failure prints the call and exits 1. */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define NEPTUNE_CUDA_CHECK(call)                                                                                     \
    do {                                                                                                             \
        const cudaError_t err_ = (call);                                                                             \
        if (err_ != cudaSuccess) {                                                                                   \
            /* stderr and _Exit: the CUDA runtime's exit handlers must not swallow the message */                    \
            std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_), __FILE__, __LINE__, #call); \
            std::fflush(stdout);                                                                                     \
            std::_Exit(1);                                                                                           \
        }                                                                                                            \
    } while (0)

/** After a launch: the launch error, then any error of the kernel itself. */
inline void sync_launch() {
    NEPTUNE_CUDA_CHECK(cudaGetLastError());
    NEPTUNE_CUDA_CHECK(cudaDeviceSynchronize());
}

#endif
